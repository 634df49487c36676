"""Threads: the list, one conversation, continuing it with the reply streamed, fork, export.

Reading is :class:`~exai.port.Reads` (the principal's own threads only: a
thread id of someone else's is 404, like one that does not exist). The list
marks agent sessions (threads an agent's requests on a model face made) with
their client and face, and filters by kind and client; a thread reads as a
transcript (:mod:`.transcript`). Writing is a tool call as the signed-in
principal: ``chat`` continues or starts a thread, ``fork`` copies one.

An agent session is the agent's: continuing one from here forks it first and
continues the fork with ``chat`` (exai's model, without the agent's tools), so
the agent's next request still finds its thread as it left it.

Continuing is :class:`_Say`, a plain ASGI endpoint because it must watch the
browser while the call runs: asked with ``Accept: text/event-stream`` (the
page's script does) it answers with Server-Sent Events, ``chunk`` as the
reply is written (a comment as a keep-alive while the model is quiet, as on the
model faces: :func:`~exai.web.event_stream.relay`), then ``done`` with the new
turn rendered (sanitized) or ``error``; a browser that goes away cancels the
call. Without script the form posts normally, and the page comes back with the
whole turn.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from exai.protocol import CallToolResult
from exai.web.asgi import Receive, Send, headers_of
from exai.web.console.app import PREFIX, Console, security_headers
from exai.web.console.transcript import group_turns, total_cost
from exai.web.console.views import client_family
from exai.web.event_stream import PING, relay
from exai.web.event_stream import sse_event as _event

__all__ = ["routes"]

_PAGE = 50
# The list's filter: ?kind= (these) and ?client= (part of an agent's client name).
KINDS = {"": "All", "agent": "Agent sessions", "chat": "Threads"}


def routes(console: Console) -> list[BaseRoute]:
    face = _Threads(console)
    say = _Say(console)
    return [
        Route(f"{PREFIX}/threads", face.list, methods=["GET"]),
        Route(f"{PREFIX}/threads", say, methods=["POST"]),
        Route(f"{PREFIX}/threads/{{thread_id}}", face.show, methods=["GET"]),
        Route(f"{PREFIX}/threads/{{thread_id}}/continue", say, methods=["POST"]),
        Route(f"{PREFIX}/threads/{{thread_id}}/fork", face.fork, methods=["POST"]),
        Route(f"{PREFIX}/threads/{{thread_id}}/export", face.export, methods=["GET"]),
    ]


def _models(console: Console) -> list[str]:
    listing = console.core.reads.models()
    return [m["name"] for m in listing["models"] if m.get("configured")]


class _Threads:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    async def list(self, request: Request) -> Response:
        params = request.query_params
        query = params.get("q", "")[:200]
        kind = params.get("kind", "")
        kind = kind if kind in KINDS else ""
        client = params.get("client", "").strip()[:100]
        page = max(1, _int(params.get("page"), 1))
        threads = await self.reads.threads(
            self.console.principal(request), query=query, kind=kind, client=client,
            limit=_PAGE + 1, offset=(page - 1) * _PAGE, costs=True,
        )  # fmt: skip
        for thread in threads:
            thread["cost"] = total_cost(thread.get("cost") or {})
            if thread["face"]:  # its badge lists the sessions of its client
                thread["family"] = client_family(thread["client"])
                thread["only"] = _listing(kind="agent", client=thread["family"])
        filters = {"q": query, "kind": kind, "client": client}
        more = len(threads) > _PAGE
        return self.console.page(
            request,
            "threads.html",
            threads=threads[:_PAGE],
            query=query,
            kind=kind,
            tabs=[(label, _listing(q=query, kind=k), k == kind) for k, label in KINDS.items()],
            client=client,
            filtered=any(filters.values()),
            newer=_listing(**filters, page=str(page - 1)) if page > 1 else None,
            older=_listing(**filters, page=str(page + 1)) if more else None,
            models=_models(self.console),
        )

    async def show(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        found = await self.reads.thread(self.console.principal(request), thread_id)
        if found is None:
            return self.console.refused(
                request,
                404,
                f"There is no thread {thread_id!r} of yours (it may have expired or been deleted).",
            )
        turns = group_turns(found["messages"], found["costs"], found["traces"])
        last_model = next((t.model for t in reversed(turns) if t.model), None)
        return self.console.page(
            request,
            "thread.html",
            thread=found["thread"],
            turns=turns,
            complete=found["complete"],
            cost=total_cost(found["cost"]),
            lineage=found["lineage"],
            models=_models(self.console),
            last_model=last_model,
        )

    async def fork(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        thread_id = request.path_params["thread_id"]
        arguments: dict[str, Any] = {"continuation_id": thread_id}
        if fields.get("at_seq", "").isdigit():
            arguments["at_seq"] = int(fields["at_seq"])
        result = await self.console.call(request, "fork", arguments)
        session = self.console.session(request)
        if result.error is not None:
            session.flash("error", self.console.explain("fork", result.error))
            return self.console.redirect(f"{PREFIX}/threads/{thread_id}")
        session.flash("ok", "Forked: this is the copy; the original is unchanged.")
        return self.console.redirect(f"{PREFIX}/threads/{result.metadata.continuation_id}")

    async def export(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        text = await self.reads.thread_export(self.console.principal(request), thread_id)
        if text is None:
            return self.console.refused(request, 404, f"There is no thread {thread_id!r} of yours.")
        headers = {
            **security_headers(),
            "content-disposition": f'attachment; filename="exai-{thread_id}.jsonl"',
        }
        return Response(text, media_type="application/x-ndjson", headers=headers)


class _Say:
    """``POST /console/threads`` (a new thread) and ``.../{id}/continue``: one ``chat`` turn."""

    def __init__(self, console: Console) -> None:
        self.console = console

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self._respond(request, receive, send)
        if response is not None:
            await response(scope, receive, send)

    async def _respond(self, request: Request, receive: Receive, send: Send) -> Response | None:
        console = self.console
        fields = await console.form(request)
        if fields is None:
            return console.refusal(request)
        thread_id = request.path_params.get("thread_id")
        principal = console.principal(request)
        before, agent, fork = 0, False, None
        if thread_id is not None:
            found = await console.core.reads.thread(principal, thread_id, details=False)
            if found is None:
                return console.refused(request, 404, f"There is no thread {thread_id!r} of yours.")
            before, agent = found["thread"]["last_seq"], found["thread"]["face"] is not None
        prompt = fields.get("prompt", "").strip()
        if not prompt:
            return console.refused(request, 400, "Write a message first.")
        arguments: dict[str, Any] = {"prompt": prompt, "model": fields.get("model") or "auto"}
        if thread_id is not None and agent:
            # The agent's session stays the agent's: the person continues a copy of it.
            forked = await console.call(request, "fork", {"continuation_id": thread_id})
            if forked.error is not None:
                console.session(request).flash("error", console.explain("fork", forked.error))
                return console.redirect(f"{PREFIX}/threads/{thread_id}")
            console.session(request).flash(
                "ok", "This is your fork of the agent's session, which is unchanged."
            )
            thread_id = fork = forked.metadata.continuation_id
        if thread_id is not None:
            arguments["continuation_id"] = thread_id
        if "text/event-stream" not in headers_of(request.scope).get("accept", ""):
            result = await console.call(request, "chat", arguments)
            if result.error is not None:
                console.session(request).flash("error", console.explain("chat", result.error))
                return console.redirect(
                    f"{PREFIX}/threads/{thread_id}" if thread_id else f"{PREFIX}/threads"
                )
            return console.redirect(f"{PREFIX}/threads/{result.metadata.continuation_id}")
        await self._stream(request, arguments, before, fork, receive, send)
        return None

    async def _stream(
        self,
        request: Request,
        arguments: dict[str, Any],
        before: int,
        fork: str | None,
        receive: Receive,
        send: Send,
    ) -> None:
        head = [(k.encode(), v.encode()) for k, v in security_headers().items()]
        head += [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        texts: asyncio.Queue[str] = asyncio.Queue()

        async def chunks(batch: list[str]) -> None:
            body = b"".join(_event("chunk", {"text": text}) for text in batch)
            await send({"type": "http.response.body", "body": body, "more_body": True})

        async def ping() -> None:
            await send({"type": "http.response.body", "body": PING, "more_body": True})

        call = self.console.call(
            request, "chat", arguments, stream=True, on_chunk=lambda c: texts.put_nowait(c.text)
        )
        ping_s = self.console.core.settings.faces_ping_s
        result = await relay(call, texts, receive, deliver=chunks, ping=ping, ping_s=ping_s)
        if result is not None:  # None: the browser left, and its call was cancelled
            await self._finish(request, result, before, fork, send)

    async def _finish(
        self, request: Request, result: CallToolResult, before: int, fork: str | None, send: Send
    ) -> None:
        if result.error is not None:
            failed = {"message": self.console.explain("chat", result.error)}
            if fork is not None:  # the fork was made: the page offers it
                failed["url"] = f"{PREFIX}/threads/{fork}"
            event = _event("error", failed)
        else:
            thread_id = result.metadata.continuation_id or ""
            found = await self.console.core.reads.thread(
                self.console.principal(request), thread_id, max_messages=200
            )
            turns = (
                []
                if found is None
                else [
                    t
                    for t in group_turns(found["messages"], found["costs"], found["traces"])
                    if t.seq > before
                ]
            )
            html = self.console.fragment(
                "_turns.html",
                turns=turns,
                thread_id=thread_id,
                csrf=self.console.session(request).csrf,
            )
            done = {"html": html, "thread": thread_id, "url": f"{PREFIX}/threads/{thread_id}"}
            event = _event("done", done)
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _listing(**params: str) -> str:
    """The thread list's address with these of its parameters (the empty ones left out)."""
    given = {name: value for name, value in params.items() if value}
    return f"{PREFIX}/threads" + (f"?{urlencode(given)}" if given else "")


def _int(text: str | None, default: int) -> int:
    try:
        return int(text or default)
    except ValueError:
        return default
