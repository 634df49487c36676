"""An in-process client of the daemon: calls go to the dispatcher without a socket.

The daemon's HTTP faces (MCP at ``/mcp``, the OpenAI-compatible ``/v1``) run in
the daemon's own process, so they need no WebSocket to reach it. A
:class:`LocalClient` opens a session for an authenticated principal and submits
``call_tool`` frames to the same :class:`~exai.daemon.dispatch.Dispatcher` that
WebSocket clients reach, so limits, scopes, deadlines, audit and replay are the
same whichever way a call arrives. It offers the part of
:class:`~exai.client.ExaiClient` that the MCP server needs, so
:class:`~exai.shim.server.Shim` serves both faces.

Frames the dispatcher sends the session (results as encoded bytes, progress and
chunks as models) are routed by ``request_id`` to the call waiting for them.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exai.auth import Principal
from exai.protocol import (
    CallToolFrame,
    CallToolResult,
    ProgressFrame,
    StreamChunk,
    ToolInfo,
    parse_server_frame,
)

if TYPE_CHECKING:
    from exai.daemon.server import Daemon

__all__ = ["LocalClient"]


@dataclass(slots=True)
class _Waiter:
    future: asyncio.Future[CallToolResult]
    on_progress: Callable[[ProgressFrame], Any] | None
    on_chunk: Callable[[StreamChunk], Any] | None


class LocalClient:
    """One principal's session on the daemon, called in process."""

    url = "in-process"
    connected = True

    def __init__(self, daemon: Daemon, principal: Principal, session_id: str | None = None) -> None:
        self.daemon = daemon
        sid = session_id or f"local-{secrets.token_urlsafe(12)}"
        self.session, _ = daemon.sessions.open(principal, sid)
        self.session.send = self
        self.session_id = self.session.id
        self._waiting: dict[str, _Waiter] = {}
        self._ids = itertools.count(1)
        self.on_reconnect: Callable[[], None] | None = None

    # --- what the MCP server calls ---------------------------------------------

    async def wait_connected(self, timeout_s: float | None = None) -> None:
        return None

    async def list_tools(self, timeout_s: float = 30.0) -> list[ToolInfo]:
        return self.daemon.registry.infos()

    def new_request_id(self) -> str:
        return f"{self.session_id}-{next(self._ids)}"

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        request_id: str | None = None,
        timeout_s: float | None = None,
        stream: bool = False,
        on_progress: Callable[[ProgressFrame], Any] | None = None,
        on_chunk: Callable[[StreamChunk], Any] | None = None,
        roots: list[str] | None = None,
        **_: Any,
    ) -> CallToolResult:
        rid = request_id or self.new_request_id()
        frame = CallToolFrame(request_id=rid, name=name, arguments=arguments or {},
                              timeout_s=timeout_s, stream=stream, roots=roots)  # fmt: skip
        future: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = _Waiter(future, on_progress, on_chunk)
        try:
            self.daemon.dispatcher.submit(self.session, frame)
            return await future
        except asyncio.CancelledError:
            self.daemon.dispatcher.cancel(self.session, rid)
            raise
        finally:
            self._waiting.pop(rid, None)

    async def cancel(self, request_id: str) -> None:
        self.daemon.dispatcher.cancel(self.session, request_id)

    def close(self) -> None:
        """Detach from the session; calls still running are cancelled."""
        for rid in list(self.session.calls):
            self.daemon.dispatcher.cancel(self.session, rid)
        self.session.send = None
        self.daemon.sessions.discard(self.session.id)

    # --- what the dispatcher calls (the session's Sender) -----------------------

    async def __call__(self, frame: Any) -> None:
        self.post(frame)

    def post(self, frame: Any) -> None:
        if isinstance(frame, bytes | str):
            frame = parse_server_frame(frame)
        waiter = self._waiting.get(getattr(frame, "request_id", None) or "")
        if waiter is None:
            return
        if isinstance(frame, CallToolResult):
            if not waiter.future.done():
                waiter.future.set_result(frame)
        elif isinstance(frame, ProgressFrame) and waiter.on_progress is not None:
            self._notify(waiter.on_progress, frame)
        elif isinstance(frame, StreamChunk) and waiter.on_chunk is not None:
            self._notify(waiter.on_chunk, frame)

    def _notify(self, callback: Callable[[Any], Any], frame: Any) -> None:
        outcome = callback(frame)
        if asyncio.iscoroutine(outcome):
            self.daemon.spawn(outcome)
