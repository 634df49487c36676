"""OpenAI-compatible ``/v1/models`` and ``/v1/chat/completions``: the I/O edge.

Any OpenAI client (the ``openai`` SDK, Aider, Continue, Cline) pointed at
``http://<daemon>:8078/v1`` with an exai token as its API key gets exai's model
routing, fallback, limits and audit trail, and, when it names a thread,
exai's conversation store (docs/openai.md). Each request is one tool call
through the core's port, made by a :class:`~exai.port.Caller` for the
principal the :class:`~exai.web.guard.Guard` authenticated, so scopes, rate
limits, deadlines and audit are the same as over WebSocket:
:mod:`exai.web.openai_request` says which call, :mod:`exai.web.openai_response`
and :mod:`exai.web.openai_errors` shape its answer.

A streamed answer starts only when the call produces its first text, so a call
that fails before (a bad argument, an unknown thread, a provider that is down)
gets its own HTTP status rather than an error inside a 200 stream. A client
that goes away, streaming or not, cancels its call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from exai import tracing
from exai.port import Caller, Port
from exai.protocol import CallToolResult, ErrorInfo
from exai.web.asgi import (
    BodyTooLarge,
    Receive,
    Send,
    disconnected,
    headers_of,
    read_body,
    send_json,
    unless_client_leaves,
)
from exai.web.guard import principal_of
from exai.web.openai_errors import OpenAIRequestError, error_body, error_response
from exai.web.openai_request import NEW_THREAD, THREAD_HEADER, CompletionCall, parse_request
from exai.web.openai_response import (
    ChunkWriter,
    completion_body,
    model_list,
    result_text,
    sse,
)

__all__ = ["routes"]


def routes(core: Port) -> list[BaseRoute]:
    face = _Models(core)
    return [
        Route("/v1/models", face.list, methods=["GET"]),
        Route("/v1/models/{name:path}", face.one, methods=["GET"]),
        Route("/v1/chat/completions", _ChatCompletions(core), methods=["POST"]),
        Route("/v1/{rest:path}", _unknown_path,
              methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]  # fmt: skip


class _Models:
    def __init__(self, core: Port) -> None:
        self.core = core

    def _listing(self) -> dict[str, Any]:
        models = self.core.reads.models()
        return model_list(models["models"], models["auto"])

    async def list(self, request: Request) -> Response:
        return JSONResponse(self._listing())

    async def one(self, request: Request) -> Response:
        name = request.path_params["name"]
        for model in self._listing()["data"]:
            if model["id"].lower() == name.lower():
                return JSONResponse(model)
        error = OpenAIRequestError(f"the model {name!r} does not exist on this exai daemon",
                                   param="model", code="model_not_found", status=404)  # fmt: skip
        status, body, headers = error.response()
        return JSONResponse(body, status_code=status, headers=headers)


async def _unknown_path(request: Request) -> Response:
    error = OpenAIRequestError(
        "exai serves GET /v1/models and POST /v1/chat/completions, not "
        f"{request.method} {request.url.path}",
        code="unknown_url",
        status=404,
    )
    status, body, headers = error.response()
    return JSONResponse(body, status_code=status, headers=headers)


class _ChatCompletions:
    """``POST /v1/chat/completions`` as a plain ASGI app: it reads the client's
    disconnect while the call runs, which a request/response endpoint cannot."""

    def __init__(self, core: Port) -> None:
        self.core = core

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        try:
            body = await _read_json(receive, headers, self.core.settings.max_frame_bytes)
            if body is None:
                return  # the client left before it finished sending
            call = parse_request(body, headers)
        except OpenAIRequestError as exc:
            await send_json(send, *exc.response())
            return
        client = self.core.connect(principal_of(scope))
        try:
            with tracing.span(
                "POST /v1/chat/completions", kind=tracing.SERVER,
                parent=tracing.extract_from(headers),
                attributes={"exai.face": "openai", "http.request.method": "POST",
                            "url.path": "/v1/chat/completions", "gen_ai.operation.name": "chat",
                            "gen_ai.request.model": call.model,
                            "gen_ai.request.stream": call.stream,
                            "exai.principal": client.principal.name},
            ):  # fmt: skip
                if call.stream:
                    await self._streamed(call, client, receive, send)
                else:
                    await self._whole(call, client, receive, send)
        finally:
            client.close()

    async def _whole(
        self, call: CompletionCall, client: Caller, receive: Receive, send: Send
    ) -> None:
        result = await unless_client_leaves(client.call(call.tool, call.arguments), receive)
        if result is None:
            return
        if result.error is not None:
            tracing.fail_current(result.error)
            await _send_error(send, result.error)
            return
        text = await self._whole_text(result, client)
        body = completion_body(call, result, text, completion_id=_completion_id(),
                               created=int(time.time()))  # fmt: skip
        thread = result.metadata.continuation_id if call.thread is not None else None
        await send_json(send, 200, body, {THREAD_HEADER: thread} if thread else {})

    async def _whole_text(self, result: CallToolResult, client: Caller) -> str:
        """The answer whole: one too large for an MCP client was stored as an
        artifact of its thread (exai.tools.artifacts), and an OpenAI client takes it all."""
        extra = result.metadata.model_extra or {}
        artifact, thread = extra.get("artifact_id"), result.metadata.continuation_id
        if not artifact or not thread:
            return result_text(result)
        whole = await self.core.reads.artifact_text(thread, artifact, client.principal.name)
        # Unreadable: the beginning and the note saying where the rest is, then.
        return whole if whole is not None else result_text(result)

    async def _streamed(
        self, call: CompletionCall, client: Caller, receive: Receive, send: Send
    ) -> None:
        texts: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.ensure_future(client.call(
            call.tool, call.arguments, stream=True, on_chunk=lambda c: texts.put_nowait(c.text)
        ))  # fmt: skip
        gone = asyncio.ensure_future(disconnected(receive))
        writer = ChunkWriter(call, completion_id=_completion_id(), created=int(time.time()))
        started = False
        try:
            while True:
                text = asyncio.ensure_future(texts.get())
                await asyncio.wait({text, task, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone.done() and not text.done():
                    text.cancel()
                    return
                if not text.done():
                    text.cancel()
                    break
                if not started:
                    started = await _start_stream(send, call, writer)
                await _send_event(send, writer.text(text.result()))
            result = task.result()
            if result.error is not None:
                tracing.fail_current(result.error)
            rest = [texts.get_nowait() for _ in range(texts.qsize())]
            if result.error is not None and not started and not rest:
                await _send_error(send, result.error)
                return
            if not started:
                started = await _start_stream(send, call, writer)
            for piece in rest:
                await _send_event(send, writer.text(piece))
            if result.error is not None:  # after text was sent, the status cannot change
                await _send_event(send, error_body(result.error))
            else:
                for chunk in writer.last(result):
                    await _send_event(send, chunk)
                await _send_event(send, "[DONE]")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()
            if not task.done():  # the client left: Caller.call cancels the call
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _start_stream(send: Send, call: CompletionCall, writer: ChunkWriter) -> bool:
    headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]  # fmt: skip
    if call.thread is not None and call.thread != NEW_THREAD:
        headers.append((THREAD_HEADER.encode(), call.thread.encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await _send_event(send, writer.first())
    return True


async def _send_event(send: Send, data: dict[str, Any] | str) -> None:
    await send({"type": "http.response.body", "body": sse(data), "more_body": True})


async def _read_json(receive: Receive, headers: dict[str, str], limit: int) -> Any:
    """The request body as JSON; None if the client disconnected while sending it."""
    try:
        body = await read_body(receive, headers, limit)
    except BodyTooLarge:
        raise OpenAIRequestError(
            f"the request body is over {limit:,} bytes (EXAI_MAX_FRAME_BYTES)",
            code="request_too_large",
            status=413,
        ) from None
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError as exc:
        raise OpenAIRequestError(f"the request body is not valid JSON: {exc}") from None


async def _send_error(send: Send, info: ErrorInfo) -> None:
    await send_json(send, *error_response(info))


def _completion_id() -> str:
    return f"chatcmpl-{secrets.token_hex(12)}"
