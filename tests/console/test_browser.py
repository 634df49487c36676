"""The console in a real browser: headless Chromium (Debian's) driven by Playwright,
against a live daemon and the provider emulator. A screenshot of each page is
written to build/console/ on every run."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from tests.console.agents import anthropic_session, script_tool_round, settle
from tests.console.conftest import ALICE, BOB, SHOTS
from tests.console.live import wait_until

pytestmark = pytest.mark.timeout(180)

PAYLOAD = (
    "Look: <script>window.__pwned = 1; console.log('PWNED-script')</script> and "
    "<img src=x onerror=\"window.__pwned = 2; console.log('PWNED-img')\"> and "
    "[a link](javascript:window.__pwned=3) and "
    '<a href="javascript:window.__pwned=4">another</a>'
)

# What an agent's tool call and its result may carry, and a reply that links and embeds.
XSS_ARGUMENTS = {
    "path": "<img src=x onerror=window.__xss=1>",
    "note": "</script><script>window.__xss=2</script>",
}
XSS_RESULT = "<img src=x onerror=window.__xss=1>\n</script><script>window.__xss=2</script>"
XSS_ANSWER = (
    "The notes say: {last_tool_result}\n\n[open the notes](javascript:window.__xss=3) and "
    "<img src=x onerror=window.__xss=4>\n\n"
    "```python\nprint('</pre><script>window.__xss=5</script>')\n```"
)
AGENT_SHOT = SHOTS.parent / "screenshots" / "agent-session.png"


class Visitor:
    """One person in their own browser context (cookies of their own), with every
    console error, page error and dialog of theirs recorded."""

    def __init__(self, browser: Any, base: str, *, width: int = 1280, height: int = 900) -> None:
        self.base = base
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"pageerror: {error}"))
        self.page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        if message.type == "error" or "PWNED" in message.text:
            self.problems.append(f"console.{message.type}: {message.text}")

    def _dialog(self, dialog: Any) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def go(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def sign_in(self, token: str, then: str = "/console/threads") -> None:
        self.go(f"/console/login?next={quote(then, safe='')}")
        self.page.fill("#token", token)
        self.page.click("form#signin button[type=submit]")
        self.page.wait_for_url(self.base + then)

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visitors(browser: Any, live: Any) -> Any:
    opened: list[Visitor] = []

    def open_(**kw: Any) -> Visitor:
        visitor = Visitor(browser, live.base, **kw)
        opened.append(visitor)
        return visitor

    yield open_
    for visitor in opened:
        visitor.close()


def _iso_in(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="seconds")


def test_a_notification_link_opens_its_thread_after_sign_in_and_a_reply_streams_in(
    live, ntfy, emulator, visitors
):
    job = live.call(
        ALICE,
        "schedule",
        {
            "tool": "chat",
            "arguments": {"prompt": "Summarize the overnight build"},
            "when": _iso_in(1),
            "name": "overnight summary",
            "notify_url": ntfy.url("alice"),
        },
    )
    assert job.error is None, job.error
    note = wait_until(lambda: [n for n in ntfy.received if n.path == "/alice"], what="the ntfy")[0]
    link = re.search(r"open: (\S+)", note.body).group(1)
    assert link.startswith(f"{live.base}/console/threads/")
    assert note.headers["click"] == link  # tapping the notification opens it

    alice = visitors()
    alice.page.goto(link)  # not signed in yet: the sign-in form, which comes back here
    assert "/console/login?next=" in alice.page.url
    alice.shot("login")
    alice.page.fill("#token", ALICE)
    alice.page.press("#token", "Enter")
    alice.page.wait_for_url(link)
    turns = alice.page.locator("#turns article.turn")
    assert turns.count() == 1
    assert "Summarize the overnight build" in turns.first.inner_text()
    assert "emulated reply #1 to: Summarize the overnight build" in turns.first.inner_text()

    emulator.configure(chunk_delay_ms=150)
    emulator.script(
        {
            "text": "First, the linker failed.\n\nThen the tests timed out.\n\n"
            "Finally the retry passed."
        }
    )
    alice.page.fill("#prompt", "What failed?")
    alice.page.click("form.say button[type=submit]")
    # Part of the reply is on the page while the rest is still being written.
    alice.page.wait_for_function(
        "() => { const p = document.querySelector('.pending');"
        " return p && p.textContent.includes('linker') && !p.textContent.includes('retry'); }"
    )
    alice.page.wait_for_selector("#turn-2")
    assert "Finally the retry passed." in alice.page.locator("#turn-2").inner_text()
    assert alice.page.locator(".pending").is_hidden()
    alice.shot("thread")
    alice.go("/console/threads?q=overnight")  # found by its text
    assert alice.page.locator("ol.threads li").count() == 1
    alice.go("/console/threads")
    alice.shot("threads")

    sent = emulator.requests[-1]["body"]["messages"]
    said = [(m["role"], m.get("content")) for m in sent]
    assert ("user", "Summarize the overnight build") in said  # the earlier turn, from the store
    assert any(role == "assistant" and "overnight build" in str(text) for role, text in said)
    assert said[-1] == ("user", "What failed?")
    assert alice.problems == []


def test_a_job_made_in_the_console_is_paused_run_now_and_its_run_opens_its_thread(
    live, emulator, visitors
):
    alice = visitors()
    alice.sign_in(ALICE, "/console/jobs")
    alice.page.fill("#job-name", "weekly digest")
    alice.page.select_option("#job-tool", "chat")
    alice.page.fill("#job-args", json.dumps({"prompt": "Write the weekly digest"}))
    alice.page.fill("#job-when", "0 9 * * 1")
    alice.page.fill("#job-tz", "Europe/Berlin")
    alice.page.click("form.grid button[type=submit]")
    alice.page.wait_for_url(re.compile(r".*/console/jobs/job_\w+$"))
    assert "Scheduled weekly digest." in alice.page.inner_text("main")
    assert "Europe/Berlin" in alice.page.inner_text("main")

    alice.page.click("button:text-is('Pause')")
    alice.page.wait_for_selector("text=Paused.")
    assert "paused" in alice.page.inner_text("p.meta")
    alice.page.click("button:text-is('Run now')")
    alice.page.wait_for_selector("text=it starts when you resume it")
    assert alice.page.locator("tr.run.pending").count() == 1  # a paused job's runs wait
    alice.page.click("button:text-is('Resume')")
    alice.page.wait_for_selector("text=Resumed.")

    def run_done() -> bool:
        alice.page.reload()
        return alice.page.locator("tr.run.succeeded a:text('open thread')").count() > 0

    wait_until(run_done, what="the run to finish")
    alice.shot("job")
    alice.page.click("tr.run.succeeded a:text('open thread')")
    alice.page.wait_for_url(re.compile(r".*/console/threads/[0-9a-f-]{36}$"))
    assert "Write the weekly digest" in alice.page.inner_text("#turns")
    alice.go("/console/jobs")
    assert "weekly digest" in alice.page.inner_text("table")
    alice.shot("jobs")
    assert alice.problems == []


def test_memories_are_searched_edited_and_forgotten(live, emulator, visitors):
    alice = visitors()
    alice.sign_in(ALICE, "/console/memories")
    for text in (
        "Deploys happen on Thursdays after the standup",
        "The staging database is called heron",
    ):
        alice.page.fill("#new-content", text)
        alice.page.click("section form.grid button[type=submit]")
        alice.page.wait_for_selector(f"text={text}")
    alice.page.fill("#mq", "staging database")
    alice.page.press("#mq", "Enter")
    alice.page.wait_for_url(re.compile(r".*/console/memories\?q=staging.*"))
    found = alice.page.locator("li.memory")
    assert found.count() == 1 and "heron" in found.first.inner_text()

    found.first.locator("summary").click()
    found.first.locator("textarea").fill("The staging database is called osprey")
    found.first.locator("form.grid button[type=submit]").click()
    alice.page.wait_for_selector("text=Changed.")
    page_text = alice.page.inner_text("ul.memories")
    assert "osprey" in page_text and "heron" not in page_text
    alice.shot("memories")

    memory = alice.page.locator("li.memory", has_text="osprey")
    memory.locator("button:text-is('Forget')").click()
    alice.page.wait_for_selector("text=Forgotten.")
    assert "osprey" not in alice.page.inner_text("main")
    assert "Thursdays" in alice.page.inner_text("main")
    assert alice.problems == []


def test_spend_shows_charts_and_the_budget_left(live, emulator, visitors):
    for prompt in ("price check one", "price check two"):
        assert live.call(ALICE, "chat", {"prompt": prompt, "model": "kimi-k2.6"}).error is None
    alice = visitors()
    alice.sign_in(ALICE, "/console/spend")

    def charted() -> bool:
        alice.page.reload()
        return alice.page.locator("svg.chart rect.bar").count() >= 3  # a day, a model, a tool

    wait_until(charted, what="the spend charts")
    charts = alice.page.locator("svg.chart")
    titles = [charts.nth(i).locator("title").first.text_content() for i in range(charts.count())]
    assert "Cost per day (USD)" in titles and "Cost per model (USD)" in titles
    bars = alice.page.locator("svg.chart rect.bar title").all_text_contents()
    assert len([b for b in bars if b.startswith("kimi-k2.6:")]) == 1
    left = alice.page.inner_text(".budget .left")
    amount = float(left.split()[0])
    assert 0 < amount < 5 and left.endswith("USD left")
    assert alice.page.locator("meter").count() == 1
    alice.shot("spend")
    assert alice.problems == []


def test_model_and_memory_markup_is_shown_as_text_and_never_runs(live, emulator, visitors):
    emulator.script({"text": PAYLOAD})
    result = live.call(ALICE, "chat", {"prompt": "Show me some markup " + PAYLOAD})
    assert result.error is None
    remembered = live.call(ALICE, "remember", {"content": "Remember " + PAYLOAD})
    assert remembered.error is None
    alice = visitors()
    alice.sign_in(ALICE, f"/console/threads/{result.metadata.continuation_id}")
    alice.go("/console/memories")
    for path in (f"/console/threads/{result.metadata.continuation_id}", "/console/memories"):
        alice.go(path)
        text = alice.page.inner_text("main")
        assert "<script>window.__pwned = 1;" in text  # shown, as text
        assert "onerror=" in text and "javascript:window.__pwned=4" in text
        assert alice.page.evaluate("() => window.__pwned") is None
        assert alice.page.locator("main script, main img, main [onerror]").count() == 0
        assert alice.page.locator("a[href^='javascript:' i]").count() == 0
        for link in alice.page.locator("main .text a").all():
            link.click()  # nothing a model wrote may run when clicked either
            alice.page.go_back()
        assert alice.page.evaluate("() => window.__pwned") is None
    policy = alice.page.request.get(live.base + "/console/memories").headers
    assert "script-src 'self'" in policy["content-security-policy"]
    assert "unsafe-inline" not in policy["content-security-policy"]
    assert alice.problems == []  # no PWNED log, no dialog, no error, no CSP violation


def test_another_principal_sees_nothing_of_the_first(live, emulator, visitors):
    made = live.call(ALICE, "chat", {"prompt": "alice's private plan"})
    thread = made.metadata.continuation_id
    job = live.call(
        ALICE,
        "schedule",
        {
            "tool": "chat",
            "arguments": {"prompt": "x"},
            "when": "0 3 * * *",
            "name": "alice-only job",
        },
    )
    job_id = job.metadata.model_extra["job"]["id"]
    memory = live.call(ALICE, "remember", {"content": "alice's secret preference: tabs"})
    memory_id = memory.metadata.model_extra["memory"]["id"]

    bob = visitors()
    bob.sign_in(BOB)
    for path, marker in (
        ("/console/threads", "private plan"),
        ("/console/jobs", "alice-only"),
        ("/console/memories", "secret preference"),
        ("/console/spend", "of 5 USD"),
    ):
        bob.go(path)
        assert marker not in bob.page.inner_text("main"), path
    bob.go("/console/threads?q=private")
    assert "private plan" not in bob.page.inner_text("main")
    for path in (
        f"/console/threads/{thread}",
        f"/console/threads/{thread}/export",
        f"/console/jobs/{job_id}",
    ):
        response = bob.go(path)
        assert response.status == 404, path
        assert "private plan" not in bob.page.content()
    for path in (
        "/console/admin/health",
        "/console/admin/audit",
        "/console/admin/settings",
        "/console/admin/spend",
    ):
        response = bob.go(path)
        assert response.status == 403, path
        assert "not an operator" in bob.page.inner_text("main")
    assert bob.page.locator("nav a:text('Operator')").count() == 0

    # Bob's own session and CSRF token cannot reach alice's memory either.
    bob.go("/console/memories")
    csrf = bob.page.locator("input[name=csrf]").first.get_attribute("value")
    forged = bob.page.request.post(
        f"{live.base}/console/memories/{memory_id}/forget", form={"csrf": csrf}
    )
    assert forged.ok  # answered with bob's memories page and an error, nothing forgotten
    still = live.call(ALICE, "recall", {"query": "secret preference tabs"})
    assert memory_id in json.dumps(still.metadata.model_extra["memories"])
    # A state-changing request without the CSRF token is refused, and changes nothing.
    refused = bob.page.request.post(
        f"{live.base}/console/memories", form={"content": "planted without a token"}
    )
    assert refused.status == 403
    bob.go("/console/memories")
    assert "planted without a token" not in bob.page.inner_text("main")


def test_the_operator_sees_health_audit_settings_and_everyones_spend(live, emulator, visitors):
    assert live.call(BOB, "chat", {"prompt": "bob spends a little"}).error is None
    assert live.call(ALICE, "chat", {"prompt": "alice spends a little"}).error is None
    alice = visitors()
    alice.sign_in(ALICE, "/console/admin/health")
    assert "ready" in alice.page.inner_text("h1")
    for name in ("providers", "store", "audit"):
        assert alice.page.locator(f"section.card h2:text-matches('^{name}:')").count() == 1
    alice.shot("admin_health")

    alice.go("/console/admin/audit?kind=call_finished&who=bob")
    rows = alice.page.locator("#audit-rows tr")
    wait_until(
        lambda: (alice.page.reload(), rows.first.inner_text())[1].count("bob") > 0,
        what="bob's call in the audit trail",
    )
    assert all("call_finished" in rows.nth(i).inner_text() for i in range(rows.count()))
    alice.shot("admin_audit")

    alice.go("/console/admin/settings")
    settings_text = alice.page.inner_text("table.settings")
    assert "EXAI_WS_TOKENS" in settings_text and ALICE not in settings_text
    assert "****" in settings_text
    alice.shot("admin_settings")

    alice.go("/console/admin/spend")
    bars = alice.page.locator("svg.chart rect.bar title")
    wait_until(lambda: (alice.page.reload(), bars.all_text_contents())[1], what="the charts")
    names = " ".join(bars.all_text_contents())
    assert "alice" in names and "bob" in names
    assert "5.00 USD/day" in alice.page.inner_text("table")
    alice.shot("admin_spend")
    assert alice.problems == []


def test_keyboard_alone_signs_in_and_continues_and_a_phone_width_page_reads(
    live, emulator, visitors
):
    made = live.call(ALICE, "chat", {"prompt": "a thread for the keyboard"})
    thread = f"/console/threads/{made.metadata.continuation_id}"
    phone = visitors(width=390, height=844)
    page = phone.page
    phone.go(f"/console/login?next={quote(thread, safe='')}")
    # The token field takes the focus by itself (autofocus), which Chromium applies
    # at a rendering step after the load event: keys typed before it are lost.
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'token'")
    page.keyboard.type(ALICE)
    page.keyboard.press("Enter")
    page.wait_for_url(phone.base + thread)
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    page.focus("#prompt")
    page.keyboard.type("typed, not clicked")
    page.keyboard.press("Tab")  # the model
    page.keyboard.press("Tab")  # Send
    page.keyboard.press("Enter")
    page.wait_for_selector("#turn-2")
    assert "typed, not clicked" in page.inner_text("#turn-2")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390  # nothing wider than the phone: no sideways scrolling
    phone.shot("thread_phone")
    phone.go("/console/threads")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    phone.shot("threads_phone")
    assert phone.problems == []


def test_an_agent_session_reads_as_a_transcript_whose_blocks_open_and_whose_text_never_runs(
    live, emulator, visitors
):
    script_tool_round(emulator, XSS_ARGUMENTS, XSS_ANSWER)
    prompt = "Check the notes <img src=x onerror=window.__xss=6>"
    ref = "</script><script>window.__xss=7</script>"
    live.run(anthropic_session(live.base, ALICE, prompt, XSS_RESULT, ref=ref))
    live.run(settle(live.app))
    store = live.app.services.store
    (session,) = [
        t for t in live.run(store.list_threads("alice", face="anthropic")) if t.session_ref == ref
    ]
    kept = len(live.run(store.messages(session.id, "alice")))

    alice = visitors()
    alice.sign_in(ALICE, "/console/threads?kind=agent")
    page = alice.page
    badge = page.locator("ol.threads li", has_text="Check the notes").locator("a.badge")
    assert re.fullmatch(r"Anthropic SDK [\d.]+ · /v1/messages", badge.inner_text())
    badge.click()  # the sessions of that client
    page.wait_for_url(f"{live.base}/console/threads?kind=agent&client=Anthropic+SDK")
    alice.shot("agent_sessions")
    page.locator("ol.threads a", has_text="Check the notes").click()
    page.wait_for_url(f"{live.base}/console/threads/{session.id}")

    call, result = page.locator("details.tool-call"), page.locator("details.tool-result")
    assert call.count() == 1 and result.count() == 1
    reasoning = page.locator("details.reasoning")
    assert reasoning.count() == 2
    for block in (call, result, reasoning.first, reasoning.last):
        assert block.evaluate("d => d.open") is False  # collapsed until asked
    call.locator("summary").click()
    assert call.evaluate("d => d.open") is True
    shown = call.inner_text()
    assert "read_file" in shown and XSS_ARGUMENTS["path"] in shown
    assert XSS_ARGUMENTS["note"] in shown  # shown as the text it is
    call.locator("a:text('Its result')").click()  # opens the result it is tied to
    page.wait_for_function("() => document.querySelector('details.tool-result').open")
    assert XSS_RESULT.replace("\n", "") in result.inner_text().replace("\n", "")
    reasoning.last.locator("summary").click()
    assert "emulated reasoning" in reasoning.last.inner_text()
    assert re.fullmatch(r"0\.\d+ USD", page.locator("strong.cost.total").inner_text())
    assert page.locator("article.turn .cost").count() == 2
    assert ref in page.inner_text("p.session")  # the client's session id, as text
    assert page.locator("main pre code span.tok-nb", has_text="print").count() == 1
    assert "[open the notes](javascript:window.__xss=3)" in page.inner_text("main")  # as text
    AGENT_SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(AGENT_SHOT), full_page=True)

    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main script, main img, main iframe, main [onerror]").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0
    for link in page.locator("main .text a").all():
        link.click()  # nothing the model wrote may run when clicked either
    assert page.evaluate("() => window.__xss") is None

    page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing wider
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 900})

    # Continuing it from here continues a fork; the agent's session stays as it was.
    page.fill("#prompt", "Summarize that for me")
    page.click("form.say button[type=submit]")
    page.wait_for_url(re.compile(r".*/console/threads/(?!" + session.id + r")[0-9a-f-]{36}$"))
    assert "This is your fork of the agent's session" in page.inner_text("main")
    assert "Summarize that for me" in page.inner_text("#turns")
    assert page.locator("ul.lineage a", has_text="Check the notes").count() == 1
    assert len(live.run(store.messages(session.id, "alice"))) == kept
    assert page.evaluate("() => window.__xss") is None
    assert alice.problems == []
