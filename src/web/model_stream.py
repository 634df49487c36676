"""Running one model-face request through the port: whole, or streamed as events.

The three model faces (:mod:`exai.web.openai`, :mod:`exai.web.anthropic`,
:mod:`exai.web.responses`) differ in their wire formats only; how a call runs is
the same for all of them, and written once here:

- the call is a tool call made by the face's :class:`~exai.port.Caller`, so
  scopes, limits, budgets, deadlines, cost and audit apply as to any call; the
  face's own part (which face, the model name asked for, the client's id for its
  end user) is one ``model_request`` audit event;
- a client that goes away, whole or streamed, cancels its call;
- a streamed answer asks the call for structured model events (text, reasoning,
  tool-call pieces) and hands each to the face's :class:`StreamEncoder`;
- the stream's status line is sent only with the first event that has content,
  so a call that fails before (a bad argument, a provider that is down, a budget
  spent) gets its own HTTP status and the API's error body; after that, a failure
  can only be an error event in the stream;
- each request is a server span (OpenTelemetry, when tracing is on) continuing
  the client's ``traceparent``, marked failed when its call fails;
- a call that is quiet for ``ping_s`` seconds gets the API's keep-alive event
  (starting the stream if need be), so no proxy's idle timeout cuts it (the loop
  is :func:`exai.web.event_stream.relay`, which the console's stream runs too);
- what the result holds and no event carried (a tool that answered without
  streaming, a turn replayed from the store) is sent as events at the end, so a
  streamed answer never lacks what the whole one would have.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from exai import tracing
from exai.port import Caller, Port
from exai.protocol import CallToolResult, ErrorInfo, ModelAnswer, StreamEvent, ToolCall
from exai.web.asgi import Receive, Send, send_json, unless_client_leaves
from exai.web.event_stream import relay
from exai.web.model_call import ModelCall, memory_on

__all__ = [
    "ErrorResponder",
    "StreamEncoder",
    "audit_request",
    "face_span",
    "result_text",
    "run_streamed",
    "run_whole",
    "unstreamed",
]

ErrorResponder = Callable[[ErrorInfo], tuple[int, dict[str, Any], dict[str, str]]]
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class StreamEncoder(Protocol):
    """One API's events for one streamed answer, in order. Each method returns the
    bytes to send (``b""`` for nothing)."""

    def opening(self) -> bytes:
        """What the stream starts with, right after its headers."""
        ...

    def delta(self, event: StreamEvent) -> bytes:
        """The events for one model event."""
        ...

    def closing(self, result: CallToolResult) -> bytes:
        """The events that end a successful answer."""
        ...

    def failure(self, info: ErrorInfo) -> bytes:
        """The event that ends a stream whose call failed after it started."""
        ...

    def ping(self) -> bytes:
        """A keep-alive event."""
        ...


def unstreamed(result: CallToolResult, seen: set[str]) -> list[StreamEvent]:
    """Events for what ``result`` holds that no event of a kind in ``seen`` carried."""
    answer = ModelAnswer.of(result.metadata)
    events: list[StreamEvent] = []
    if "reasoning" not in seen and answer.reasoning:
        events.append(StreamEvent("reasoning", answer.reasoning))
    text = result_text(result)
    if "text" not in seen and text:
        events.append(StreamEvent("text", text))
    if "tool_call" not in seen:
        for index, call in enumerate(answer.tool_calls):
            function = call["function"]
            head = ToolCall(id=call["id"], type=call["type"],
                            function={"name": function["name"], "arguments": ""})  # fmt: skip
            events.append(StreamEvent("tool_call", index=index, tool_call=head))
            events.append(StreamEvent("tool_arguments", function["arguments"], index))
    return events


def result_text(result: CallToolResult) -> str:
    return "\n\n".join(output.text for output in result.outputs)


def arguments_of(core: Port, client: Caller, call: ModelCall) -> dict[str, Any]:
    """The call's arguments, with the principal's memories asked for when it has them on
    (EXAI_FACES_MEMORY or its token's ``exai_memory``), and what keeps it as a turn of
    its agent session when it is kept. A thread (``chat``) brings its own memory,
    frozen when it started."""
    arguments = call.arguments
    if call.tool == "completion" and memory_on(client.principal, core.settings.faces_memory):
        arguments = {**arguments, "memory": True}
    if call.session is not None:
        arguments = {**arguments, "session": call.session}
    return arguments


@contextlib.contextmanager
def face_span(
    call: ModelCall, client: Caller, headers: Mapping[str, str], path: str
) -> Iterator[None]:
    """The request's server span, continuing the client's trace context."""
    attributes = {
        "exai.face": call.face,
        "http.request.method": "POST",
        "url.path": path,
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": call.model,
        "gen_ai.request.stream": call.stream,
        "exai.principal": client.principal.name,
    }
    with tracing.span(
        f"POST {path}",
        kind=tracing.SERVER,
        parent=tracing.extract_from(dict(headers)),
        attributes=attributes,
    ):
        yield


def audit_request(core: Port, client: Caller, call: ModelCall, request_id: str) -> None:
    """The face's part of the call in the audit trail, beside the call's own events."""
    core.emit(
        "model_request",
        face=call.face,
        session_id=client.session_id,
        request_id=request_id,
        principal=client.principal.name,
        tool=call.tool,
        model_asked=call.model,
        stream=call.stream,
        client_ref=call.client_ref,
        adapted=[note.param for note in call.notes],
    )


async def run_whole(
    core: Port, client: Caller, call: ModelCall, receive: Receive
) -> CallToolResult | None:
    """The call's result, or None (the call cancelled) if the client leaves first."""
    request_id = client.new_request_id()
    audit_request(core, client, call, request_id)
    arguments = arguments_of(core, client, call)
    result = await unless_client_leaves(
        client.call(call.tool, arguments, request_id=request_id), receive
    )
    if result is not None and result.error is not None:
        tracing.fail_current(result.error)
    return result


async def run_streamed(
    core: Port,
    client: Caller,
    call: ModelCall,
    receive: Receive,
    send: Send,
    encoder: StreamEncoder,
    error_response: ErrorResponder,
    *,
    ping_s: float,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> CallToolResult | None:
    """Stream the call's answer with ``encoder``; the result, or None if the client left."""
    request_id = client.new_request_id()
    audit_request(core, client, call, request_id)
    events: asyncio.Queue[StreamEvent] = asyncio.Queue()
    started = False
    opening: bytes | None = None  # made before the first event is encoded, sent with it
    seen: set[str] = set()

    def open_once() -> None:
        nonlocal opening
        if opening is None:
            opening = encoder.opening()

    def encode(events: list[StreamEvent]) -> bytes:
        open_once()
        seen.update(event.kind for event in events)
        return b"".join(encoder.delta(event) for event in events)

    async def emit(data: bytes) -> None:
        nonlocal started
        if not data:
            return
        if not started:
            head = _SSE_HEADERS + (headers or [])
            await send({"type": "http.response.start", "status": 200, "headers": head})
            started = True
            open_once()
            data = (opening or b"") + data
        await send({"type": "http.response.body", "body": data, "more_body": True})

    async def deliver(batch: list[StreamEvent]) -> None:
        await emit(encode(batch))

    async def ping() -> None:
        await emit(encoder.ping())

    arguments = arguments_of(core, client, call)
    running = client.call(call.tool, arguments, request_id=request_id, stream=True,
                          on_event=events.put_nowait)  # fmt: skip
    result = await relay(running, events, receive, deliver=deliver, ping=ping, ping_s=ping_s)
    if result is None:
        return None
    if result.error is not None:
        tracing.fail_current(result.error)
        if not started:
            await send_json(send, *error_response(result.error))
            return result
        await emit(encoder.failure(result.error))
    else:
        missing = encode(unstreamed(result, seen))
        open_once()
        await emit(missing + encoder.closing(result))
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return result
