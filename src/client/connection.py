"""The client's connection: opening it with ``hello``, reading it, and reconnecting.

:class:`Connection` holds one WebSocket at a time. :meth:`Connection.connect`
opens it and says ``hello``, retrying with backoff; one reader task receives its
frames and hands each to the demultiplexer. With ``reconnect=True`` a lost
connection is opened again with exponential backoff and jitter, ``hello``
resumes the same session, and every call still waiting is sent again with the
same ``request_id`` (the daemon's replay cache makes that safe: a finished call
is answered from the cache, a running one is attached to), as is every cancel
asked for while disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Any, Self

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from exai import __version__
from exai.client.demux import Demultiplexer, maybe_await
from exai.client.errors import ClientError, ConnectError, HelloRefused
from exai.protocol import (
    CancelFrame,
    ClientInfo,
    FrameError,
    HelloAck,
    HelloFrame,
    dump_frame,
    parse_server_frame,
)

__all__ = ["Connection"]


class Connection:
    """A session with a daemon over one WebSocket at a time; see the module's docstring."""

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
        self._demux = Demultiplexer()
        # What the reader hands each frame to: the demultiplexer's router, bound once
        # (an attribute, so a test can wrap it to watch the frames go by).
        self._route: Callable[[Any], Awaitable[None]] = self._demux.route
        self._connected = asyncio.Event()
        self._closed = False
        self._reconnecting: asyncio.Task[None] | None = None
        # Set once the client can never be connected again (closed, or reconnecting gave
        # up), so that calls waiting for a connection fail instead of waiting forever.
        self._ended = asyncio.Event()
        self.gave_up: ClientError | None = None
        self.last_disconnect: BaseException | None = None
        self.last_close_code: int | None = None
        self.last_connect_error: BaseException | None = None
        self._cancels: set[str] = set()  # cancels asked for while disconnected

    async def __aenter__(self) -> Self:
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
        self._demux.fail_all(ConnectError("client closed"))

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * self.backoff_factor**attempt)
        return delay * (0.5 + random.random() / 2)  # jitter: spread reconnect storms

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

    def _lost(self) -> None:
        # Requests other than calls are cheap to repeat; the caller does so.
        self._demux.fail_waiters(ConnectError("connection lost"))
        if self.reconnect:
            if self._reconnecting is None or self._reconnecting.done():
                self._reconnecting = asyncio.create_task(self._reconnect_loop())
        else:
            self._demux.fail_all(ConnectError(f"connection lost: {self.last_disconnect}"))

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
            for pending in list(self._demux.calls.values()):
                pending.stats.resends += 1
                await self._send(pending.frame)
            cancels, self._cancels = self._cancels, set()
            for request_id in cancels:
                await self._send(CancelFrame(request_id=request_id))
            if self.on_reconnect is not None:
                await maybe_await(self.on_reconnect)
            return

    def _give_up(self, exc: ClientError) -> None:
        self.gave_up = exc
        self._ended.set()
        self._demux.fail_all(exc)

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
