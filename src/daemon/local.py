"""An in-process session: calls go to the dispatcher without a socket.

The faces that run in the daemon's own process (MCP over HTTP, the model
faces, the console, the job runner) need no WebSocket to reach the core. A
:class:`LocalCaller` opens a session for an authenticated principal and
submits ``call_tool`` frames to the same dispatcher that WebSocket clients
reach, so limits, scopes, deadlines, budgets, audit and replay are the same
whichever way a call arrives. It is the :class:`exai.port.Caller` the core
hands out, and offers the part of :class:`~exai.client.ExaiClient` that the
MCP server needs, so :class:`~exai.shim.server.Shim` serves both MCP faces.

Frames the dispatcher sends the session (results as encoded bytes, progress and
chunks as models, structured model events as they are) are routed by
``request_id`` to the call waiting for them.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exai.auth import Principal
from exai.daemon.call import ModelEvent
from exai.daemon.dispatch import Dispatcher
from exai.daemon.session import SessionRegistry
from exai.protocol import (
    CallToolFrame,
    CallToolResult,
    ProgressFrame,
    StreamChunk,
    StreamEvent,
    ToolInfo,
    parse_server_frame,
)

__all__ = ["LocalCaller"]


@dataclass(slots=True)
class _Waiter:
    future: asyncio.Future[CallToolResult]
    on_progress: Callable[[ProgressFrame], Any] | None
    on_chunk: Callable[[StreamChunk], Any] | None
    on_event: Callable[[StreamEvent], Any] | None


class LocalCaller:
    """One principal's session on the core, called in process."""

    url = "in-process"
    connected = True

    def __init__(
        self, sessions: SessionRegistry, dispatcher: Dispatcher,
        tools: Callable[[Principal], list[ToolInfo]], spawn: Callable[[Any], None],
        principal: Principal, session_id: str | None = None, *, face: str = "local",
        client: str | None = None,
    ) -> None:  # fmt: skip
        """A session of ``principal`` in ``sessions``, its calls submitted to
        ``dispatcher``; ``tools`` lists what a principal may call, ``spawn`` runs a
        callback's coroutine on the core's behalf."""
        self._sessions = sessions
        self._dispatcher = dispatcher
        self._tools = tools
        self._spawn = spawn
        self.principal = principal
        sid = session_id or f"local-{secrets.token_urlsafe(12)}"
        self.session, _ = sessions.open(principal, sid, send=self, face=face, client=client)
        self.session_id = self.session.id
        self._waiting: dict[str, _Waiter] = {}
        self._ids = itertools.count(1)
        self.on_reconnect: Callable[[], None] | None = None

    # --- what the faces call ----------------------------------------------------

    async def wait_connected(self, timeout_s: float | None = None) -> None:
        return None

    async def list_tools(self, timeout_s: float = 30.0) -> list[ToolInfo]:
        return self._tools(self.principal)

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
        on_event: Callable[[StreamEvent], Any] | None = None,
        roots: list[str] | None = None,
        **_: Any,
    ) -> CallToolResult:
        rid = request_id or self.new_request_id()
        frame = CallToolFrame(request_id=rid, name=name, arguments=arguments or {},
                              timeout_s=timeout_s, stream=stream or on_event is not None,
                              roots=roots)  # fmt: skip
        future: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = _Waiter(future, on_progress, on_chunk, on_event)
        dispatcher = self._dispatcher
        try:
            dispatcher.submit(self.session, frame, events=on_event is not None)
            return await future
        except asyncio.CancelledError:
            dispatcher.cancel(self.session, rid)
            raise
        finally:
            self._waiting.pop(rid, None)

    async def cancel(self, request_id: str) -> None:
        self._dispatcher.cancel(self.session, request_id)

    def close(self) -> None:
        """Detach from the session; calls still running are cancelled."""
        for rid in list(self.session.calls):
            self._dispatcher.cancel(self.session, rid)
        self.session.send = None
        self._sessions.discard(self.session.id)

    # --- what the dispatcher calls (the session's Sender) -----------------------

    async def __call__(self, frame: Any) -> None:
        self.post(frame)

    def now(self, frame: bytes) -> bool:
        self.post(frame)  # in process, there is always room
        return True

    def post(self, frame: Any) -> None:
        if isinstance(frame, bytes | str):
            frame = parse_server_frame(frame)
        waiter = self._waiting.get(getattr(frame, "request_id", None) or "")
        if waiter is None:
            return
        if isinstance(frame, CallToolResult):
            if not waiter.future.done():
                waiter.future.set_result(frame)
        elif isinstance(frame, ModelEvent):
            if waiter.on_event is not None:
                self._notify(waiter.on_event, frame.delta)
        elif isinstance(frame, ProgressFrame) and waiter.on_progress is not None:
            self._notify(waiter.on_progress, frame)
        elif isinstance(frame, StreamChunk) and waiter.on_chunk is not None:
            self._notify(waiter.on_chunk, frame)

    def _notify(self, callback: Callable[[Any], Any], frame: Any) -> None:
        outcome = callback(frame)
        if asyncio.iscoroutine(outcome):
            self._spawn(outcome)
