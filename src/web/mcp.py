"""MCP over streamable HTTP at ``/mcp``: the shim's handlers, served by the daemon itself.

The ``mcp`` SDK's session manager speaks both revisions it supports: 2025-11-25
(``initialize``, ``Mcp-Session-Id``, SSE responses) and 2026-07-28
(``server/discover``, one self-contained POST per request). Behind it,
:class:`HttpMcp` is the stdio shim's :class:`~exai.shim.server.Shim` with two
differences: each request is served by a :class:`~exai.web.local.LocalClient`
for the principal the :class:`~exai.web.guard.Guard` authenticated, and one
daemon serves many IDE windows, so roots are kept per MCP session rather than
per process. Results, errors and progress go through the same translation
module as the shim's.

Long calls are not cut by the transport: the SDK keeps an SSE response open
with pings while a call runs, and each daemon progress heartbeat becomes a
``notifications/progress`` on the call's token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from exai.files.roots import is_loopback
from exai.shim.roots import NoRoots, SessionRoots
from exai.shim.server import Shim
from exai.web.guard import principal_of
from exai.web.local import LocalClient

if TYPE_CHECKING:
    from exai.daemon.server import Daemon

__all__ = ["MAX_BODY_BYTES", "HttpMcp", "session_manager"]

MAX_BODY_BYTES = 4 * 1024 * 1024


class HttpMcp(Shim):
    def __init__(self, daemon: Daemon) -> None:
        settings = daemon.settings
        roots = SessionRoots() if is_loopback(settings.ws_host) else NoRoots()
        super().__init__(None, roots=roots)
        self.daemon = daemon

    def client_for(self, ctx: ServerRequestContext[Any]) -> LocalClient:
        request = ctx.request
        if request is None:  # only the HTTP transport serves this face
            raise RuntimeError("an HTTP MCP request without its HTTP request")
        return LocalClient(self.daemon, principal_of(request.scope))

    def release(self, client: Any) -> None:
        client.close()


def session_manager(daemon: Daemon) -> StreamableHTTPSessionManager:
    server = HttpMcp(daemon).build_server()
    # The SDK checks a 2026-07-28 call's Mcp-Param-* headers against the tool's schema;
    # without this lookup it lists every tool on every call to find that one schema.
    server.get_tool_input_schema = _input_schema(daemon)
    # Host and Origin are checked by the Guard in front of every HTTP route.
    return StreamableHTTPSessionManager(app=server, max_request_body_size=MAX_BODY_BYTES)


def _input_schema(daemon: Daemon) -> Any:
    def lookup(name: str) -> dict[str, Any] | None:
        tool = daemon.registry.get(name)
        return tool.input_schema() if tool is not None else None

    return lookup
