"""The HTTP listener: a Starlette app under uvicorn, in the daemon's event loop.

A listener of its own rather than the WebSocket port: websockets answers plain
HTTP only with whole responses (no streaming), and moving the WebSocket
protocol onto an ASGI server costs more than the protocol's overhead budget
allows (``scripts/bench/one_port.py``: an ASGI echo alone is about 1.5x the
bare websockets echo's round trip). The daemon owns signals and shutdown, so
uvicorn's own signal handling is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Generator
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from exai import __version__
from exai.logs import get_logger
from exai.port import Port
from exai.web import admin_keys, admin_limits
from exai.web.anthropic import routes as anthropic_routes
from exai.web.anthropic_errors import error_body as anthropic_error_body
from exai.web.connections import HttpConnections
from exai.web.console import Console
from exai.web.console import pages as console_pages
from exai.web.guard import Guard
from exai.web.listener import ListenerLimits, protocol_for
from exai.web.mcp import MAX_BODY_BYTES, session_managers
from exai.web.mcp_calls import McpEndpoint
from exai.web.mcp_sessions import McpSessions
from exai.web.openai import routes as openai_routes
from exai.web.openai_errors import error_body as openai_error_body
from exai.web.responses import routes as responses_routes
from exai.web.session_book import SessionBook

__all__ = ["WebFace"]

log = get_logger("exai.web")
# The face each path prefix belongs to, as the audit trail names it (the longest wins).
FACES = {"/v1": "openai", "/v1/messages": "anthropic", "/v1/responses": "responses",
         "/mcp": "mcp-http"}  # fmt: skip


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the daemon handles SIGINT and SIGTERM and stops this server itself


class _AsgiEndpoint:
    """An ASGI app as a Starlette route endpoint (a bound method would be taken for a view),
    so that ``/mcp`` is served as it is, not redirected to ``/mcp/``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


class WebFace:
    def __init__(self, core: Port) -> None:
        self.core = core
        self.mcp, self.mcp_json = session_managers(core)
        s = core.settings
        self.mcp_sessions = SessionBook(per_principal=s.mcp_max_sessions_per_principal,
                                        total=s.mcp_max_sessions,
                                        idle_s=s.mcp_session_idle_s)  # fmt: skip
        self.connections = HttpConnections(core.admission, max_total=s.max_connections,
                                           max_per_address=s.max_connections_per_ip)  # fmt: skip
        self.limits = ListenerLimits(self.connections, s.http_header_timeout_s,
                                     s.http_body_timeout_s)  # fmt: skip
        self.console = Console(core)
        self._server: _Uvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self._mcp_task: asyncio.Task[None] | None = None
        self._mcp_done = asyncio.Event()
        self.port = 0

    def build_app(self) -> Any:
        s = self.core.settings
        app = Starlette(routes=[
            Route("/health", self._health),
            Route("/mcp", _AsgiEndpoint(McpSessions(
                McpEndpoint(self.mcp, self.mcp_json, MAX_BODY_BYTES), self.mcp_sessions)),
                  methods=["GET", "POST", "DELETE"]),
            *console_pages.routes(self.console),
            *admin_keys.routes(self.core),
            *admin_limits.routes(self.core),
            *anthropic_routes(self.core),
            *responses_routes(self.core),
            *openai_routes(self.core),  # last: it answers every other /v1 path with a 404
        ])  # fmt: skip
        # The console's own pages post forms from the address people reach it at.
        origins = [*s.allowed_origins, *([_origin(s.public_url)] if s.public_url else [])]
        return Guard(app, self.core.auth, host=s.ws_host, port=self.port,
                     allowed_origins=origins,
                     throttle=self.core.admission,
                     on_login=self.connections.logged_in,
                     error_bodies={"/v1": openai_error_body,
                                   "/v1/messages": anthropic_error_body},
                     api_key_paths=("/v1/messages",),
                     cookie_realms=(self.console.realm(),),
                     faces=FACES, audit=self.core.emit)  # fmt: skip

    @property
    def own_url(self) -> str:
        """The listener's own address, for links when EXAI_PUBLIC_URL is not set."""
        host = self.core.settings.ws_host
        if host in ("0.0.0.0", "::", ""):
            host = socket.getfqdn()
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    async def start(self) -> None:
        s = self.core.settings
        assert s.http_port is not None
        family = socket.AF_INET6 if ":" in s.ws_host else socket.AF_INET
        # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets whose
        # proto says TCP, and without it every keep-alive response waits ~40 ms for an ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((s.ws_host, s.http_port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.build_app(), log_level="warning", lifespan="off", access_log=False,
            timeout_keep_alive=30, timeout_graceful_shutdown=5, server_header=False,
            date_header=True, ws="none",
            http=protocol_for(self.limits),
            headers=[("server", f"exai/{__version__}")],
        )  # fmt: skip
        ready = asyncio.Event()
        self._mcp_task = asyncio.create_task(self._run_mcp(ready), name="exai-mcp-sessions")
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({waiting, self._mcp_task}, return_when=asyncio.FIRST_COMPLETED)
        if self._mcp_task.done():  # it failed before it was ready
            waiting.cancel()
            self._mcp_task.result()
        server = self._server = _Uvicorn(config)
        self._task = asyncio.create_task(server.serve(sockets=[sock]), name="exai-http")
        while not server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        self._register_gauges()
        log.info("http listening", host=s.ws_host, port=self.port,
                 faces=["/mcp", "/v1", "/v1/messages", "/v1/responses", "/console"])  # fmt: skip

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        self._mcp_done.set()
        if self._mcp_task is not None:
            with contextlib.suppress(Exception):
                await self._mcp_task

    async def _run_mcp(self, ready: asyncio.Event) -> None:
        # A session manager's task group must be entered and left by one task.
        async with self.mcp.run(), self.mcp_json.run():
            ready.set()
            await self._mcp_done.wait()

    def _register_gauges(self) -> None:
        m, connections, sessions = self.core.metrics, self.connections, self.mcp_sessions
        m.gauge("exai_http_connections", "Open connections on the HTTP listener",
                lambda: len(connections))  # fmt: skip
        for reason in ("capacity", "unauthenticated"):
            m.gauge(f"exai_http_refused_{reason}",
                    f"HTTP connections refused since start ({reason} limit)",
                    lambda reason=reason: connections.refused[reason])  # fmt: skip
        for phase in ("headers", "body"):
            m.gauge(f"exai_http_timeouts_{phase}",
                    f"HTTP connections closed since start: {phase} too slow",
                    lambda phase=phase: connections.timed_out[phase])  # fmt: skip
        m.gauge("exai_mcp_sessions", "MCP sessions open on /mcp (2025-11-25 era)",
                lambda: len(sessions))  # fmt: skip
        m.gauge("exai_mcp_sessions_refused", "MCP sessions refused at a cap since start",
                lambda: sessions.refused)  # fmt: skip

    async def _health(self, request: Request) -> Response:
        uptime = round(time.time() - self.core.started_at, 1)
        if self.core.draining:
            # A balancer stops sending requests here while running calls finish; the
            # WebSocket port says the same by closing its listener.
            return JSONResponse({"status": "draining", "uptime_s": uptime}, status_code=503)
        return JSONResponse({"status": "ok", "uptime_s": uptime})


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
