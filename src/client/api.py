""":class:`ExaiClient`: the public client, its requests over a :class:`Connection`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from exai.client.connection import Connection
from exai.client.demux import CallStats, ChunkCallback, PendingCall, ProgressCallback
from exai.client.errors import ConnectError
from exai.protocol import (
    CallToolFrame,
    CallToolResult,
    CancelFrame,
    ListToolsFrame,
    PingFrame,
    ToolInfo,
)

__all__ = ["ExaiClient"]


class ExaiClient(Connection):
    """Calls, tool lists and pings to a daemon, any number at once on one connection.

    Construct it with the daemon's URL and a token (see :class:`Connection` for the
    connection's options), then ``async with`` it or :meth:`connect`.
    """

    def new_request_id(self) -> str:
        return self._demux.new_request_id()

    async def _request(self, frame: Any, request_id: str, timeout_s: float) -> Any:
        await self._wait_connected()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._demux.waiters[request_id] = fut
        await self._send(frame)
        try:
            async with asyncio.timeout(timeout_s):
                return await fut
        finally:
            self._demux.waiters.pop(request_id, None)

    async def list_tools(self, timeout_s: float = 30.0) -> list[ToolInfo]:
        rid = self.new_request_id()
        res = await self._request(ListToolsFrame(request_id=rid), rid, timeout_s)
        return list(res.tools)

    async def ping(self, timeout_s: float = 10.0) -> float:
        rid = self.new_request_id()
        start = time.perf_counter()
        await self._request(PingFrame(request_id=rid), rid, timeout_s)
        return time.perf_counter() - start

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        request_id: str | None = None,
        timeout_s: float | None = None,
        stream: bool = False,
        on_progress: ProgressCallback | None = None,
        on_chunk: ChunkCallback | None = None,
        stats: CallStats | None = None,
        wait_s: float | None = None,
        roots: list[str] | None = None,
        trace: dict[str, str] | None = None,
    ) -> CallToolResult:
        """Call a tool and wait for its one ``call_tool_res``.

        ``timeout_s`` is the deadline asked of the daemon; ``wait_s`` bounds how
        long this client waits (default: that deadline plus a margin). ``roots``
        are the calling IDE's workspace roots, passed on for the file policy.
        ``trace``: the caller's W3C ``traceparent`` (and ``tracestate``), which
        the daemon's spans of this call take as their parent.
        """
        rid = request_id or self.new_request_id()
        trace = trace or {}
        frame = CallToolFrame(request_id=rid, name=name, arguments=arguments or {},
                              timeout_s=timeout_s, stream=stream, roots=roots,
                              traceparent=trace.get("traceparent"),
                              tracestate=trace.get("tracestate"))  # fmt: skip
        await self._wait_connected()
        fut: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
        pending = PendingCall(frame, fut, on_progress, on_chunk, stats or CallStats())
        pending.stats.sent_at = time.perf_counter()
        self._demux.calls[rid] = pending
        await self._send(frame)
        limit = wait_s if wait_s is not None else (timeout_s or 3600.0) + 30.0
        try:
            async with asyncio.timeout(limit):
                return await fut
        finally:
            self._demux.calls.pop(rid, None)

    async def cancel(self, request_id: str) -> None:
        """Cancel a call; while disconnected, the cancel is sent after the reconnect."""
        if self._ws is None and self.reconnect and not self._closed:
            self._cancels.add(request_id)
            return
        await self._send(CancelFrame(request_id=request_id))

    async def send_raw(self, text: str | bytes) -> None:
        """Send an arbitrary frame (tests and fuzzers use this)."""
        if self._ws is None:
            raise ConnectError("not connected")
        await self._ws.send(text)
