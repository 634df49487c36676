"""MCP over streamable HTTP at ``/mcp``: the shim's handlers, served by the daemon itself.

The ``mcp`` SDK's session manager speaks both revisions it supports: 2025-11-25
(``initialize``, ``Mcp-Session-Id``, SSE responses) and 2026-07-28
(``server/discover``, one self-contained POST per request). Behind it,
:class:`HttpMcp` is the stdio shim's :class:`~exai.shim.server.Shim` with two
differences: each request is served by a :class:`~exai.port.Caller`
for the principal the :class:`~exai.web.guard.Guard` authenticated, and one
daemon serves many IDE windows, so roots are kept per MCP session rather than
per process. Results, errors and progress go through the same translation
module as the shim's.

Long calls are not cut by the transport: the SDK keeps an SSE response open
with pings while a call runs, and each daemon progress heartbeat becomes a
``notifications/progress`` on the call's token.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from exai import tracing
from exai.files.roots import is_loopback
from exai.port import Caller, Port
from exai.shim.roots import NoRoots, SessionRoots
from exai.shim.server import Shim
from exai.web.asgi import headers_of
from exai.web.guard import principal_of
from exai.web.model_call import client_name

__all__ = ["MAX_BODY_BYTES", "HttpMcp", "session_managers"]

MAX_BODY_BYTES = 4 * 1024 * 1024


class HttpMcp(Shim):
    def __init__(self, core: Port) -> None:
        roots = SessionRoots() if is_loopback(core.settings.ws_host) else NoRoots()
        super().__init__(None, roots=roots)
        self.core = core

    face = "mcp-http"

    def trace_parent(self, ctx: ServerRequestContext[Any]) -> Any:
        """The HTTP request's ``traceparent`` header, when ``_meta`` carries none."""
        request = ctx.request
        return None if request is None else tracing.extract_from(headers_of(request.scope))

    def client_for(self, ctx: ServerRequestContext[Any]) -> Caller:
        request = ctx.request
        if request is None:  # only the HTTP transport serves this face
            raise RuntimeError("an HTTP MCP request without its HTTP request")
        return self.core.connect(principal_of(request.scope), face="mcp",
                                 client=client_name(headers_of(request.scope)))  # fmt: skip

    def release(self, client: Any) -> None:
        client.close()


def session_managers(
    core: Port,
) -> tuple[StreamableHTTPSessionManager, StreamableHTTPSessionManager]:
    """The SDK's session manager for ``/mcp``, and one of the same server answering
    in JSON (for requests that asked for no progress; see :mod:`exai.web.mcp_calls`)."""
    server = HttpMcp(core).build_server()
    # The SDK checks a 2026-07-28 call's Mcp-Param-* headers against the tool's schema;
    # without this lookup it lists every tool on every call to find that one schema.
    server.get_tool_input_schema = core.tool_schema
    # Host and Origin are checked by the Guard in front of every HTTP route. The caps
    # and the idle expiry are checked first by exai.web.mcp_sessions, which knows who
    # owns each session; the SDK's own are the same figures, as a backstop.
    s = core.settings
    limits: dict[str, Any] = {"max_request_body_size": MAX_BODY_BYTES,
                              "max_sessions": s.mcp_max_sessions,
                              "session_idle_timeout": s.mcp_session_idle_s}  # fmt: skip
    return (
        StreamableHTTPSessionManager(app=server, **limits),
        StreamableHTTPSessionManager(app=server, json_response=True, **limits),
    )
