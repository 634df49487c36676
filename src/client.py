"""An asyncio client for protocol v1, shared by everything that talks to a daemon.

One :class:`ExaiClient` holds one WebSocket and any number of calls in flight.
A single reader task receives every frame and routes it by ``request_id`` to the
call that is waiting for it (the demultiplexer), so ``progress`` and
``stream_chunk`` frames reach the right callback and results may arrive in any
order. With ``reconnect=True`` a lost connection is re-established with
exponential backoff and jitter, ``hello`` resumes the same session, and every
call still waiting is sent again with the same ``request_id``; the daemon's
replay cache makes that safe (a finished call is answered from the cache, a
running one is attached to).

``exai call``, ``exai shim``, the baseline collector, the benchmarks and the
tests all use this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from exai import __version__
from exai.protocol import (
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    CancelFrame,
    ClientInfo,
    ErrorFrame,
    ErrorInfo,
    FrameError,
    HelloAck,
    HelloFrame,
    ListToolsFrame,
    ListToolsResult,
    PingFrame,
    PongFrame,
    ProgressFrame,
    StreamChunk,
    ToolInfo,
    dump_frame,
    parse_server_frame,
)

__all__ = [
    "CallStats",
    "ClientError",
    "ConnectError",
    "ExaiClient",
    "HelloRefused",
    "RequestFailed",
]

ProgressCallback = Callable[[ProgressFrame], Awaitable[None] | None]
ChunkCallback = Callable[[StreamChunk], Awaitable[None] | None]


class ClientError(Exception):
    pass


class ConnectError(ClientError):
    """The daemon could not be reached."""


class HelloRefused(ClientError):
    """The daemon answered ``hello`` with ``ok: false`` (or closed with 4003)."""

    def __init__(self, error: ErrorInfo | None, close_code: int | None = None) -> None:
        message = error.message if error else f"closed with {close_code}"
        super().__init__(message)
        self.error = error
        self.close_code = close_code


class RequestFailed(ClientError):
    """The daemon answered a request with an ``error`` frame."""

    def __init__(self, error: ErrorInfo) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


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
class _Pending:
    frame: CallToolFrame
    future: asyncio.Future[CallToolResult]
    on_progress: ProgressCallback | None = None
    on_chunk: ChunkCallback | None = None
    stats: CallStats = field(default_factory=CallStats)
    ack: CallToolAck | None = None


class ExaiClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        session_id: str | None = None,
        client_name: str = "exai-client",
        client_version: str = __version__,
        max_frame_bytes: int = 32 * 1024 * 1024,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        open_timeout: float = 10.0,
        connect_attempts: int = 3,
        backoff_base_s: float = 0.5,
        backoff_factor: float = 2.0,
        backoff_max_s: float = 30.0,
        reconnect: bool = False,
        max_reconnect_attempts: int | None = None,
        on_reconnect: Callable[[], Awaitable[None] | None] | None = None,
        compression: bool = False,
    ) -> None:
        self.url = url
        self.token = token
        self.session_id = session_id
        self.client_info = ClientInfo(name=client_name, version=client_version)
        self.max_frame_bytes = max_frame_bytes
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.open_timeout = open_timeout
        self.connect_attempts = connect_attempts
        self.backoff_base_s = backoff_base_s
        self.backoff_factor = backoff_factor
        self.backoff_max_s = backoff_max_s
        self.reconnect = reconnect
        self.max_reconnect_attempts = max_reconnect_attempts
        self.on_reconnect = on_reconnect
        self.compression = compression
        self.hello: HelloAck | None = None
        self.reconnects = 0
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, _Pending] = {}
        self._waiters: dict[str, asyncio.Future[Any]] = {}
        self._connected = asyncio.Event()
        self._closed = False
        self._ids = itertools.count(1)
        self._prefix = secrets.token_hex(4)
        self._reconnecting: asyncio.Task[None] | None = None
        # Set once the client can never be connected again (closed, or reconnecting gave
        # up), so that calls waiting for a connection fail instead of waiting forever.
        self._ended = asyncio.Event()
        self.gave_up: ClientError | None = None
        self.last_disconnect: BaseException | None = None
        self.last_close_code: int | None = None
        self.last_connect_error: BaseException | None = None
        self._cancels: set[str] = set()  # cancels asked for while disconnected

    # --- connection -------------------------------------------------------------

    async def __aenter__(self) -> ExaiClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def connect(self) -> HelloAck:
        """Connect and say hello, retrying ``connect_attempts`` times with backoff."""
        last: BaseException | None = None
        for attempt in range(self.connect_attempts):
            try:
                return await self._open()
            except HelloRefused:
                raise
            except (OSError, InvalidHandshake, ConnectionClosed, TimeoutError) as exc:
                last = exc
                if attempt + 1 < self.connect_attempts:
                    await asyncio.sleep(self._backoff(attempt))
        raise ConnectError(f"cannot reach exai at {self.url}: {last}") from last

    async def _open(self) -> HelloAck:
        ws = await connect(
            self.url,
            max_size=self.max_frame_bytes,
            ping_interval=self.ping_interval,
            ping_timeout=self.ping_timeout,
            open_timeout=self.open_timeout,
            compression="deflate" if self.compression else None,
            max_queue=256,
        )
        hello = HelloFrame(token=self.token, session_id=self.session_id,
                           client=self.client_info, protocol=1)  # fmt: skip
        try:
            await ws.send(dump_frame(hello))
            async with asyncio.timeout(self.open_timeout):
                raw = await ws.recv()
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            if code == 4003:
                raise HelloRefused(None, code) from exc
            raise
        ack = parse_server_frame(raw)
        if not isinstance(ack, HelloAck) or not ack.ok:
            await ws.close()
            raise HelloRefused(ack.error if isinstance(ack, HelloAck) else None)
        self.hello = ack
        self.session_id = ack.session_id
        self._ws = ws
        self._reader = asyncio.create_task(self._read(ws), name="exai-client-reader")
        self._connected.set()
        return ack

    async def close(self) -> None:
        self._closed = True
        self._ended.set()
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        self._fail_all(ConnectError("client closed"))

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * self.backoff_factor**attempt)
        return delay * (0.5 + random.random() / 2)  # jitter: spread reconnect storms

    # --- the demultiplexer --------------------------------------------------------

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for raw in ws:
                try:
                    frame = parse_server_frame(raw)
                except FrameError:
                    continue  # a frame we cannot read cannot be routed either
                await self._route(frame)
        except ConnectionClosed as exc:
            self.last_disconnect = exc
        finally:
            self.last_close_code = ws.close_code
            self._connected.clear()
            if self._ws is ws:
                self._ws = None
            if not self._closed:
                self._lost()

    async def _route(self, frame: Any) -> None:
        if isinstance(frame, CallToolResult):
            pending = self._pending.pop(frame.request_id, None)
            if pending is not None and not pending.future.done():
                pending.stats.done_s = time.perf_counter() - pending.stats.sent_at
                pending.future.set_result(frame)
        elif isinstance(frame, CallToolAck):
            pending = self._pending.get(frame.request_id)
            if pending is not None:
                pending.ack = frame
                if pending.stats.ack_s is None:
                    pending.stats.ack_s = time.perf_counter() - pending.stats.sent_at
        elif isinstance(frame, StreamChunk):
            pending = self._pending.get(frame.request_id)
            if pending is not None:
                pending.stats.chunks += 1
                if pending.stats.first_chunk_s is None:
                    pending.stats.first_chunk_s = time.perf_counter() - pending.stats.sent_at
                await _maybe_await(pending.on_chunk, frame)
        elif isinstance(frame, ProgressFrame):
            pending = self._pending.get(frame.request_id)
            if pending is not None:
                await _maybe_await(pending.on_progress, frame)
        elif isinstance(frame, ListToolsResult | PongFrame):
            self._resolve(frame.request_id, frame)
        elif isinstance(frame, ErrorFrame):
            rid = frame.request_id
            if rid in self._pending:
                pending = self._pending.pop(rid)
                if not pending.future.done():
                    pending.future.set_exception(RequestFailed(frame.error))
            elif rid is not None:
                self._resolve(rid, RequestFailed(frame.error))

    def _resolve(self, request_id: str | None, value: Any) -> None:
        if request_id is None:
            return
        fut = self._waiters.pop(request_id, None)
        if fut is None or fut.done():
            return
        if isinstance(value, BaseException):
            fut.set_exception(value)
        else:
            fut.set_result(value)

    def _lost(self) -> None:
        # Requests other than calls are cheap to repeat; the caller does so.
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(ConnectError("connection lost"))
        self._waiters.clear()
        if self.reconnect:
            if self._reconnecting is None or self._reconnecting.done():
                self._reconnecting = asyncio.create_task(self._reconnect_loop())
        else:
            self._fail_all(ConnectError(f"connection lost: {self.last_disconnect}"))

    async def _reconnect_loop(self, initial: bool = False) -> None:
        attempt = 0
        while not self._closed:
            if attempt or not initial:
                await asyncio.sleep(self._backoff(attempt))
            try:
                await self._open()
            except HelloRefused as exc:
                self.last_connect_error = exc
                self._give_up(exc)
                return
            except (OSError, InvalidHandshake, ConnectionClosed, TimeoutError) as exc:
                self.last_connect_error = exc
                attempt += 1
                if self.max_reconnect_attempts is not None and attempt >= (
                    self.max_reconnect_attempts
                ):
                    self._give_up(ConnectError(f"gave up reconnecting to {self.url}"))
                    return
                continue
            if not initial:
                self.reconnects += 1
            for pending in list(self._pending.values()):
                pending.stats.resends += 1
                await self._send(pending.frame)
            cancels, self._cancels = self._cancels, set()
            for request_id in cancels:
                await self._send(CancelFrame(request_id=request_id))
            if self.on_reconnect is not None:
                await _maybe_await(self.on_reconnect)
            return

    def _give_up(self, exc: ClientError) -> None:
        self.gave_up = exc
        self._ended.set()
        self._fail_all(exc)

    def _fail_all(self, exc: BaseException) -> None:
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(exc)
        self._pending.clear()
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(exc)
        self._waiters.clear()

    async def _send(self, frame: Any) -> None:
        ws = self._ws
        if ws is None:
            return  # re-sent after the reconnect
        with contextlib.suppress(ConnectionClosed):
            await ws.send(dump_frame(frame))

    def connect_in_background(self) -> None:
        """Start connecting without waiting for it; with ``reconnect=True`` it retries.

        For long-lived clients (the shim) that must start serving before the daemon
        is up: their calls wait for the connection (see :meth:`wait_connected`).
        """
        if self._closed or self._connected.is_set():
            return
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.create_task(self._reconnect_loop(initial=True))

    async def wait_connected(self, timeout_s: float | None = None) -> None:
        """Wait until connected; raise :class:`ConnectError` after ``timeout_s``."""
        if self._connected.is_set():
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._wait_connected()
        except TimeoutError:
            reason = f": {self.last_connect_error}" if self.last_connect_error else ""
            raise ConnectError(f"cannot reach exai at {self.url}{reason}") from None

    async def _wait_connected(self) -> None:
        if self._connected.is_set():
            return
        if self._closed or not self.reconnect or self.gave_up is not None:
            raise self.gave_up or ConnectError("not connected")
        connected = asyncio.ensure_future(self._connected.wait())
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait({connected, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            connected.cancel()
            ended.cancel()
        if not self._connected.is_set():
            raise self.gave_up or ConnectError("client closed")

    # --- requests ---------------------------------------------------------------

    def new_request_id(self) -> str:
        return f"{self._prefix}-{next(self._ids)}"

    async def _request(self, frame: Any, request_id: str, timeout_s: float) -> Any:
        await self._wait_connected()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = fut
        await self._send(frame)
        try:
            async with asyncio.timeout(timeout_s):
                return await fut
        finally:
            self._waiters.pop(request_id, None)

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
        pending = _Pending(frame, fut, on_progress, on_chunk, stats or CallStats())
        pending.stats.sent_at = time.perf_counter()
        self._pending[rid] = pending
        await self._send(frame)
        limit = wait_s if wait_s is not None else (timeout_s or 3600.0) + 30.0
        try:
            async with asyncio.timeout(limit):
                return await fut
        finally:
            self._pending.pop(rid, None)

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


async def _maybe_await(callback: Callable[..., Any] | None, *args: Any) -> None:
    if callback is None:
        return
    result = callback(*args)
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        await result
