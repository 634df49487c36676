// The console's only script: it streams a reply into the page as it is written,
// lets a signed-in browser skip the sign-in form, follows the audit trail and the
// request log, and opens the collapsed block (a tool call, its result) a link points
// to. Every page works without it. Untrusted text is only ever set as textContent; HTML
// is inserted only as the server rendered and sanitized it.
"use strict";

function sseEvents(buffer) {
  // Splits complete "event: x\ndata: {...}\n\n" blocks off the front of buffer.
  const events = [];
  let cut;
  while ((cut = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, cut);
    buffer = buffer.slice(cut + 2);
    let name = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    events.push({ name, data: data ? JSON.parse(data) : {} });
  }
  return { events, rest: buffer };
}

async function streamReply(form) {
  const pending = form.querySelector(".pending");
  const button = form.querySelector("button[type=submit]");
  const prompt = form.querySelector("textarea[name=prompt]");
  pending.hidden = false;
  pending.className = "pending";
  pending.textContent = "";
  button.disabled = true;
  try {
    const response = await fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      headers: { Accept: "text/event-stream" },
      credentials: "same-origin",
    });
    if (!response.ok || !response.body) {
      pending.classList.add("error");
      pending.textContent = "Not sent (HTTP " + response.status + "); reload the page and try again.";
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const parsed = sseEvents(buffer + decoder.decode(value, { stream: true }));
      buffer = parsed.rest;
      for (const event of parsed.events) {
        if (event.name === "chunk") {
          pending.textContent += event.data.text;
        } else if (event.name === "error") {
          pending.classList.add("error");
          pending.textContent = event.data.message;
          if (event.data.url) {  // a fork was made before the model failed: offer it
            const link = document.createElement("a");
            link.href = event.data.url;
            link.textContent = "Open your fork";
            pending.append(" ", link);
          }
        } else if (event.name === "done") {
          if (form.dataset.stream === "new" || form.dataset.stream === "fork") {
            window.location.assign(event.data.url);
            return;
          }
          const template = document.createElement("template");
          template.innerHTML = event.data.html;
          document.getElementById("turns").append(template.content);
          pending.hidden = true;
          pending.textContent = "";
          prompt.value = "";
        }
      }
    }
  } catch (error) {
    pending.classList.add("error");
    pending.textContent = "The connection to exai was lost: " + error;
  } finally {
    button.disabled = false;
  }
}

function followAudit(body) {
  const url = new URL(window.location.href);
  url.searchParams.set("rows", "1");
  window.setInterval(async () => {
    const response = await fetch(url, { credentials: "same-origin" });
    if (response.ok) body.innerHTML = await response.text();
  }, 3000);
}

function followRequests(body) {
  // The request log's first page: ask for the rows written since the newest one shown
  // and put them on top; the server rendered and escaped them.
  const url = new URL(window.location.href);
  url.searchParams.set("rows", "1");
  window.setInterval(async () => {
    url.searchParams.set("after", body.dataset.top || "0");
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return;
    const top = response.headers.get("x-exai-top");
    const html = await response.text();
    if (html.trim()) {
      for (const none of body.querySelectorAll("tr:not([data-id])")) none.remove();
      body.insertAdjacentHTML("afterbegin", html);
    }
    if (top) body.dataset.top = top;
  }, 3000);
}

function openTarget() {
  // A link to a tool call or result (#m12-call0, #m14) opens its block and the blocks
  // around it; the browser scrolls to what it then shows.
  const id = decodeURIComponent(window.location.hash.slice(1));
  let node = id ? document.getElementById(id) : null;
  if (!node) return;
  const target = node;
  for (; node; node = node.parentElement) {
    if (node.tagName === "DETAILS") node.open = true;
  }
  target.scrollIntoView({ block: "start" });
}

window.addEventListener("hashchange", openTarget);

document.addEventListener("DOMContentLoaded", () => {
  openTarget();
  for (const form of document.querySelectorAll("form.say[data-stream]")) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      streamReply(form);
    });
  }
  const signin = document.getElementById("signin");
  if (signin) {
    // A link from another site (a notification) arrives without the SameSite=Strict
    // cookie; this same-site request carries it, and a signed-in browser goes on.
    fetch("/console/session", { credentials: "same-origin", redirect: "manual" })
      .then((response) => { if (response.ok) window.location.replace(signin.dataset.next); })
      .catch(() => {});
  }
  const audit = document.querySelector("#audit-rows[data-follow]");
  if (audit) followAudit(audit);
  const requests = document.querySelector("#request-rows[data-follow]");
  if (requests) followRequests(requests);
});
