"""The client's demultiplexer: every frame the daemon sends, routed to the request
waiting for it.

One reader task receives every frame of a connection and hands it to
:meth:`Demultiplexer.route`, which finds the request by ``request_id``: a call's
``call_tool_ack``, ``progress`` and ``stream_chunk`` frames reach its callbacks
and its one ``call_tool_res`` resolves it, in whatever order calls finish; a
``list_tools_res`` or ``pong`` resolves the request that asked. Nothing here
touches a socket, so the routing is the same whichever connection delivered the
frame, before or after a reconnect.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from exai.client.errors import RequestFailed
from exai.protocol import (
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    ErrorFrame,
    ListToolsResult,
    PongFrame,
    ProgressFrame,
    StreamChunk,
)

__all__ = [
    "CallStats",
    "ChunkCallback",
    "Demultiplexer",
    "PendingCall",
    "ProgressCallback",
    "maybe_await",
]

ProgressCallback = Callable[[ProgressFrame], Awaitable[None] | None]
ChunkCallback = Callable[[StreamChunk], Awaitable[None] | None]


@dataclass
class CallStats:
    """Timings of one call, in seconds since it was first sent (``time.perf_counter``)."""

    sent_at: float = 0.0
    ack_s: float | None = None
    first_chunk_s: float | None = None
    done_s: float | None = None
    resends: int = 0
    chunks: int = 0


@dataclass
class PendingCall:
    """A ``call_tool`` sent and not yet answered: re-sent as it is after a reconnect."""

    frame: CallToolFrame
    future: asyncio.Future[CallToolResult]
    on_progress: ProgressCallback | None = None
    on_chunk: ChunkCallback | None = None
    stats: CallStats = field(default_factory=CallStats)
    ack: CallToolAck | None = None


class Demultiplexer:
    """The requests of one client waiting for their answers, by ``request_id``."""

    def __init__(self) -> None:
        self.calls: dict[str, PendingCall] = {}
        # Other requests (list_tools, ping): cheap to repeat, so not re-sent.
        self.waiters: dict[str, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._prefix = secrets.token_hex(4)

    def new_request_id(self) -> str:
        """An id no other request of this client has, before or after a reconnect."""
        return f"{self._prefix}-{next(self._ids)}"

    async def route(self, frame: Any) -> None:
        """Hand ``frame`` to the request it answers; frames for no one are dropped."""
        if isinstance(frame, CallToolResult):
            pending = self.calls.pop(frame.request_id, None)
            if pending is not None and not pending.future.done():
                pending.stats.done_s = time.perf_counter() - pending.stats.sent_at
                pending.future.set_result(frame)
        elif isinstance(frame, CallToolAck):
            pending = self.calls.get(frame.request_id)
            if pending is not None:
                pending.ack = frame
                if pending.stats.ack_s is None:
                    pending.stats.ack_s = time.perf_counter() - pending.stats.sent_at
        elif isinstance(frame, StreamChunk):
            pending = self.calls.get(frame.request_id)
            if pending is not None:
                pending.stats.chunks += 1
                if pending.stats.first_chunk_s is None:
                    pending.stats.first_chunk_s = time.perf_counter() - pending.stats.sent_at
                await maybe_await(pending.on_chunk, frame)
        elif isinstance(frame, ProgressFrame):
            pending = self.calls.get(frame.request_id)
            if pending is not None:
                await maybe_await(pending.on_progress, frame)
        elif isinstance(frame, ListToolsResult | PongFrame):
            self.resolve(frame.request_id, frame)
        elif isinstance(frame, ErrorFrame):
            rid = frame.request_id
            if rid in self.calls:
                pending = self.calls.pop(rid)
                if not pending.future.done():
                    pending.future.set_exception(RequestFailed(frame.error))
            elif rid is not None:
                self.resolve(rid, RequestFailed(frame.error))

    def resolve(self, request_id: str | None, value: Any) -> None:
        """Answer the waiter of ``request_id`` with ``value`` (raised if an exception)."""
        if request_id is None:
            return
        fut = self.waiters.pop(request_id, None)
        if fut is None or fut.done():
            return
        if isinstance(value, BaseException):
            fut.set_exception(value)
        else:
            fut.set_result(value)

    def fail_waiters(self, exc: BaseException) -> None:
        """Fail every request but the calls (a lost connection: calls are re-sent)."""
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(exc)
        self.waiters.clear()

    def fail_all(self, exc: BaseException) -> None:
        """Fail every request, calls included (the client will never connect again)."""
        for pending in self.calls.values():
            if not pending.future.done():
                pending.future.set_exception(exc)
        self.calls.clear()
        self.fail_waiters(exc)


async def maybe_await(callback: Callable[..., Any] | None, *args: Any) -> None:
    """Call ``callback``, awaiting what it returns if that is awaitable."""
    if callback is None:
        return
    result = callback(*args)
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        await result
