"""``/mcp`` sessions held to their owner, capped, and given one standalone stream each.

In front of :class:`~exai.web.mcp_calls.McpEndpoint`, for requests of the
2025-11-25 era (``initialize`` and ``Mcp-Session-Id``; a 2026-07-28 request
has no session and passes straight on). The rules are the
:class:`~exai.web.session_book.SessionBook`'s; this layer reads the request,
asks the book, and answers a refusal itself before the SDK sees it:

- an opening request (a POST without a session id) over the caller's cap, or
  the daemon's: 429 or 503, with a JSON-RPC error naming the setting;
- a session id the caller does not own, for any method: 404, the SDK's own
  "Session not found", so another principal cannot tell it exists;
- a second standalone stream (GET) on one session while the first is open: 409.

The SDK binds a session to the credential that opened it as well, when the
request carries an authenticated user (``scope["user"]``); this layer sets one
for the principal the guard authenticated, so the SDK's check is a second line
behind the book's.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from exai.web.asgi import headers_of, send_json
from exai.web.guard import principal_of
from exai.web.mcp_calls import is_modern
from exai.web.session_book import SessionBook

__all__ = ["McpSessions"]

_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("ascii")
# The SDK's JSON-RPC code for its own session refusals (INVALID_REQUEST).
_INVALID_REQUEST = -32600


class McpSessions:
    """ASGI: the book's rules in front of ``app`` (the ``/mcp`` endpoint)."""

    def __init__(self, app: Any, book: SessionBook) -> None:
        self.app = app
        self.book = book

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if is_modern(scope):
            await self.app(scope, receive, send)
            return
        owner = principal_of(scope).name
        scope["user"] = AuthenticatedUser(
            AccessToken(token="", client_id=owner, scopes=[], subject=owner)
        )
        session_id = headers_of(scope).get(MCP_SESSION_ID_HEADER.lower())
        if session_id is None:
            if scope["method"] == "POST":
                await self._open(owner, scope, receive, send)
            else:
                await self.app(scope, receive, send)  # the SDK refuses it (no session)
            return
        await self._on_session(owner, session_id, scope, receive, send)

    async def _open(self, owner: str, scope: Any, receive: Any, send: Any) -> None:
        book = self.book
        refusal = book.reserve(owner)
        if refusal is not None:
            status = 429 if refusal.mine else 503
            await send_json(send, status, _error(refusal.message))
            return
        opened: list[str] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                new = _header(message, _SESSION_HEADER)
                if new is not None:
                    book.opened(new, owner)
                    book.begin(new)
                    opened.append(new)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            book.release(owner)
            for session_id in opened:
                book.end(session_id)

    async def _on_session(
        self, owner: str, session_id: str, scope: Any, receive: Any, send: Any
    ) -> None:
        book = self.book
        known = book.owner(session_id)
        if known is not None and known != owner:
            await send_json(send, 404, _error("Session not found"))
            return
        stream = scope["method"] == "GET"
        if stream and not book.open_stream(session_id):
            message = "Conflict: Only one SSE stream is allowed per session"
            await send_json(send, 409, _error(message))
            return
        status: list[int] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        book.begin(session_id)
        try:
            await self.app(scope, receive, watch)
        finally:
            book.end(session_id)
            if stream:
                book.close_stream(session_id)
        answered = status[0] if status else None
        if answered == 404 or (scope["method"] == "DELETE" and answered is not None
                               and answered < 300):  # fmt: skip
            book.ended(session_id)


def _header(message: dict[str, Any], name: bytes) -> str | None:
    for key, value in message.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _error(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": message}}
