"""``/mcp`` in front of the SDK's session manager: a 2026-07-28 request that asked
for no progress is answered as JSON unless it runs long.

The SDK answers every 2026-07-28 POST the same way: a task group with the
handler and a disconnect watcher, a memory stream for notifications, and a
15-second window after which the response turns into an SSE stream with pings.
It answers with plain JSON when the handler is done within the window, which is
almost always, but the machinery costs about a third of an ``echo`` call's
instructions over HTTP. A request without a progress token can receive no
notifications, so here it is served by a second session manager of the same
server, made with ``json_response=True`` (the SDK's public switch for that
branch), on an answer that may still become a stream:

- the handler runs as one task, and the request's own task waits for it, for
  the client to disconnect (which cancels the call, as in the SDK's stream
  mode), and for the same 15-second window;
- if the window passes first, the response starts as ``text/event-stream``
  with a ping comment every 15 seconds, so no proxy's idle timeout cuts a long
  call, and the JSON-RPC answer is sent as its one ``message`` event.

Everything else (a progress token, the 2025-11-25 handshake era, GET and
DELETE, anything malformed) goes to the session manager unchanged, as does the
validation of the request itself: this module only chooses the branch. The one
exception is a body no call could serve, which the SDK's 2026-07-28 branch would
take (it parses with ``json``): a lone surrogate escape is refused here as JSON-RPC's
parse error, by the parser every HTTP face shares (:func:`exai.web.asgi.parse_json`;
the handshake era parses with pydantic-core already).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import MutableMapping
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import INVALID_REQUEST, PARSE_ERROR
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from exai.web.asgi import disconnected, headers_of, parse_json, send_json

__all__ = ["STREAM_AFTER_S", "McpEndpoint", "is_modern"]

# The SDK's own deferral window and ping interval in its stream mode.
STREAM_AFTER_S = 15.0

_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


class McpEndpoint:
    """The ASGI app at ``/mcp``: the session manager, with the JSON branch chosen above
    (``json_manager``: the same server's manager with ``json_response=True``)."""

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        json_manager: StreamableHTTPSessionManager,
        max_body_bytes: int,
    ) -> None:
        self.manager = manager
        self.json_manager = json_manager
        self.max_body_bytes = max_body_bytes
        # The body is read here, so here too it is bounded as the manager bounds it.
        self._modern_post = RequestBodyLimitMiddleware(self._post, max_body_bytes)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "POST" and self._declared_too_large(scope):
            # Refused in JSON-RPC's shape, in either era: the SDK's own limit (which
            # still bounds a body sent without a length) answers in plain text.
            message = f"the request body is over {self.max_body_bytes:,} bytes"
            error = {"code": INVALID_REQUEST, "message": message}
            await send_json(send, 413, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        if scope["method"] == "POST" and is_modern(scope):
            await self._modern_post(scope, receive, send)
        else:
            await self.manager.handle_request(scope, receive, send)

    def _declared_too_large(self, scope: Any) -> bool:
        length = headers_of(scope).get("content-length", "")
        return length.isdigit() and int(length) > self.max_body_bytes

    async def _post(self, scope: Any, receive: Any, send: Any) -> None:
        manager = self.manager
        body = await _body(receive)
        try:
            decoded = parse_json(body)
        except ValueError as exc:
            error = {"code": PARSE_ERROR, "message": f"Parse error: {exc}"}
            await send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        if _asks_for_progress(decoded):
            # The SDK's stream mode watches receive() for the disconnect itself.
            await manager.handle_request(scope, _Replay(body, then=receive), send)
            return
        await _answer(self.json_manager, scope, _Replay(body), receive, send)


async def _answer(
    manager: StreamableHTTPSessionManager, scope: Any, replay: _Replay, receive: Any, send: Any
) -> None:
    """Run the SDK's JSON branch; stream pings if it runs long; cancel it if the client goes."""
    response = _Response(send)
    handler = asyncio.ensure_future(manager.handle_request(scope, replay, response.send))
    gone = asyncio.ensure_future(disconnected(receive))
    try:
        while True:
            done, _ = await asyncio.wait({handler, gone}, timeout=STREAM_AFTER_S,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if handler in done:
                handler.result()
                return
            if gone in done:
                replay.disconnect()
                handler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await handler
                return
            await response.ping()
    finally:
        gone.cancel()
        if not handler.done():
            handler.cancel()


class _Response:
    """The SDK's ``send`` for a JSON answer, which becomes an SSE stream once pinged."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self.streaming = False
        self._start: dict[str, Any] | None = None

    async def ping(self) -> None:
        if not self.streaming:
            self.streaming = True
            await self._send({"type": "http.response.start", "status": 200,
                              "headers": _SSE_HEADERS})  # fmt: skip
        await self._send({"type": "http.response.body", "body": b": ping\r\n\r\n",
                          "more_body": True})  # fmt: skip

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if not self.streaming:
            await self._send(message)
        elif message["type"] == "http.response.body":
            # The JSON-RPC answer, after pings: one SSE message event, as the SDK sends it.
            data = message.get("body", b"")
            await self._send({"type": "http.response.body",
                              "body": b"event: message\r\ndata: " + data + b"\r\n\r\n",
                              "more_body": False})  # fmt: skip


class _Replay:
    """A ``receive`` that gives the body already read, then what ``then`` receives, or
    without ``then`` waits for :meth:`disconnect` (told by the one task that reads
    the real ``receive``)."""

    def __init__(self, body: bytes, then: Any = None) -> None:
        self._body: bytes | None = body
        self._then = then
        self._gone = asyncio.Event()

    def disconnect(self) -> None:
        self._gone.set()

    async def __call__(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        if self._then is not None:
            message: dict[str, Any] = await self._then()
            return message
        await self._gone.wait()
        return {"type": "http.disconnect"}


def is_modern(scope: Any) -> bool:
    """A 2026-07-28-era request, by its MCP-Protocol-Version header (as the SDK routes)."""
    version = next((v for k, v in scope["headers"] if k == _VERSION_HEADER), None)
    return version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS


async def _body(receive: Any) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # gone before the body was in
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _asks_for_progress(decoded: Any) -> bool:
    """Whether the request has a progress token; a body that is not a JSON-RPC request
    counts as asking, so the SDK's own path answers it."""
    if not isinstance(decoded, dict) or not isinstance(decoded.get("params"), dict | None):
        return True
    return progress_token_from_params(decoded.get("params")) is not None
