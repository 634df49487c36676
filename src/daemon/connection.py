"""One WebSocket connection: the ``hello`` handshake, then the frame loop.

The handshake enforces the contract's close codes (4000 first frame not JSON,
4001 not ``hello``, 4002 hello timeout, 4003 unauthorized). After it, every
frame is parsed by the protocol module; a frame that cannot be accepted gets an
``error`` frame and the connection keeps serving. ``call_tool`` is handed to
the dispatcher, which runs it in its own task, so the loop is always free to
read the next frame, including a ``cancel`` for a call still running.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from exai import __version__
from exai.errors import UnauthorizedError
from exai.logs import get_logger
from exai.protocol import (
    PROTOCOL_VERSION,
    CallToolFrame,
    CancelFrame,
    CloseCode,
    ErrorCode,
    ErrorInfo,
    FrameError,
    HelloAck,
    HelloFrame,
    Limits,
    ListToolsFrame,
    ListToolsResult,
    PingFrame,
    PongFrame,
    ServerInfo,
    dump_frame,
    dump_frame_bytes,
    parse_client_frame,
)

if TYPE_CHECKING:
    from exai.daemon.server import Daemon
    from exai.daemon.session import Session

__all__ = ["ConnectionHandler"]

log = get_logger("exai.daemon")

# Bad frames are logged individually up to this many per connection, then counted,
# so a client flooding garbage cannot flood the log.
_LOGGED_REJECTS = 10


class ConnectionHandler:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.settings = daemon.settings

    async def __call__(self, ws: ServerConnection) -> None:
        d = self.daemon
        peer = _peer(ws)
        d.connection_opened(ws, peer)
        session: Session | None = None
        try:
            session = await self._handshake(ws, peer)
            if session is not None:
                await self._serve(ws, session)
        except ConnectionClosed:
            pass
        finally:
            d.connection_closed(ws, peer)
            if session is not None and session.connection is ws:
                session.connection = None
                session.send = None
                d.audit.emit("connection_closed", session_id=session.id,
                             principal=session.principal.name, peer=peer)  # fmt: skip

    # --- handshake ------------------------------------------------------------

    async def _handshake(self, ws: ServerConnection, peer: str) -> Session | None:
        d = self.daemon
        try:
            async with asyncio.timeout(self.settings.hello_timeout_s):
                raw = await ws.recv()
        except TimeoutError:
            await ws.close(CloseCode.HELLO_TIMEOUT, "no hello within the hello timeout")
            return None
        if isinstance(raw, bytes):
            await ws.close(CloseCode.NOT_JSON, "first frame must be a JSON text frame")
            return None
        try:
            frame = parse_client_frame(raw)
        except FrameError as exc:
            if exc.not_json:
                await ws.close(CloseCode.NOT_JSON, "first frame is not JSON")
            elif '"hello"' in raw[:4096]:
                await self._refuse(ws, ErrorCode.INVALID_REQUEST, exc.message, CloseCode.NOT_HELLO)
            else:
                await ws.close(CloseCode.NOT_HELLO, "first frame must be hello")
            return None
        if not isinstance(frame, HelloFrame):
            await ws.close(CloseCode.NOT_HELLO, "first frame must be hello")
            return None
        if frame.protocol is not None and frame.protocol != PROTOCOL_VERSION:
            await self._refuse(ws, ErrorCode.INVALID_REQUEST,
                               f"protocol {frame.protocol} is not supported; this daemon "
                               f"speaks {PROTOCOL_VERSION}", CloseCode.NOT_HELLO)  # fmt: skip
            return None
        try:
            principal = d.auth.authenticate(frame.token)
            session, resumed = d.sessions.open(principal, frame.session_id)
        except UnauthorizedError as exc:
            d.metrics.auth_failures.labels(exc.message.split(":")[0][:40]).inc()
            d.audit.emit("auth_failed", peer=peer, reason=exc.message)
            log.info("hello refused", peer=peer, reason=exc.message)
            await self._refuse(ws, ErrorCode.UNAUTHORIZED, exc.message, CloseCode.UNAUTHORIZED)
            return None

        previous = session.connection
        if previous is not None and previous is not ws:
            # The client came back on a new socket; the old one is stale.
            d.spawn(previous.close(CloseCode.NORMAL, "session resumed elsewhere"))
        s = self.settings
        ack = HelloAck(
            ok=True,
            session_id=session.id,
            server=ServerInfo(name="exai", version=__version__),
            limits=Limits(
                max_frame_bytes=s.max_frame_bytes,
                max_inflight_per_session=s.max_inflight_per_session,
                default_timeout_s=s.default_timeout_s,
            ),
        )
        await ws.send(dump_frame(ack))
        session.connection = ws
        session.send = _sender(ws)
        client = frame.client
        d.audit.emit("connection_opened", session_id=session.id, principal=principal.name,
                     client_name=client.name if client else None,
                     client_version=client.version if client else None,
                     peer=peer, resumed=resumed)  # fmt: skip
        log.debug("session open", session_id=session.id, principal=principal.name,
                  resumed=resumed, peer=peer)  # fmt: skip
        return session

    async def _refuse(
        self, ws: ServerConnection, code: ErrorCode, message: str, close: CloseCode
    ) -> None:
        ack = HelloAck(ok=False, error=ErrorInfo(code=code, message=message))
        try:
            await ws.send(dump_frame(ack))
        finally:
            await ws.close(close, message[:120])

    # --- frame loop -----------------------------------------------------------

    async def _serve(self, ws: ServerConnection, session: Session) -> None:
        d = self.daemon
        limit = self.settings.max_frame_bytes
        rejects = 0
        clog = log.bind(session_id=session.id)
        async for raw in ws:
            try:
                if isinstance(raw, bytes):
                    raise FrameError("binary frames are not accepted; send JSON text frames")
                if len(raw) * 4 > limit and len(raw.encode()) > limit:
                    raise FrameError(f"frame exceeds max_frame_bytes ({limit} bytes)")
                frame = parse_client_frame(raw)
                await self._dispatch(session, frame)
            except FrameError as exc:
                rejects += 1
                d.metrics.frames_rejected.labels(_reason(exc)).inc()
                if rejects <= _LOGGED_REJECTS:
                    clog.info("frame rejected", request_id=exc.request_id, reason=exc.message)
                await ws.send(dump_frame(exc.to_frame()))
            except ConnectionClosed:
                raise
            except Exception as exc:  # a bug must cost one frame, not the connection
                clog.exception("frame handling failed")
                err = FrameError(f"internal error: {type(exc).__name__}",
                                 code=ErrorCode.INTERNAL_ERROR)  # fmt: skip
                await ws.send(dump_frame(err.to_frame()))
        if rejects > _LOGGED_REJECTS:
            clog.info("frames rejected on this connection", count=rejects)

    async def _dispatch(self, session: Session, frame: Any) -> None:
        d = self.daemon
        if isinstance(frame, CallToolFrame):
            await d.dispatcher.call(session, frame)
        elif isinstance(frame, ListToolsFrame):
            await session.deliver(ListToolsResult(request_id=frame.request_id,
                                                  tools=d.registry.infos()))  # fmt: skip
        elif isinstance(frame, CancelFrame):
            if not d.dispatcher.cancel(session, frame.request_id) and (
                session.replay(frame.request_id, self.settings.replay_window_s) is None
            ):
                raise FrameError(
                    f"no call {frame.request_id!r} is running in this session",
                    request_id=frame.request_id,
                )
        elif isinstance(frame, PingFrame):
            await session.deliver(PongFrame(request_id=frame.request_id))
        elif isinstance(frame, HelloFrame):
            raise FrameError("hello was already received on this connection")
        else:  # pragma: no cover - the protocol module admits no other frame
            raise FrameError(f"unsupported op {getattr(frame, 'op', '?')!r}")


def _sender(ws: ServerConnection) -> Any:
    """A coroutine function sending frames on ``ws``, dropping them once it is closed.

    When the connection is open and nothing is waiting in its write buffer, the
    frame is handed to the websockets protocol and flushed to the transport
    directly: the same two steps ``ServerConnection.send`` takes, without the
    asynchronous context manager and drain around them, which cost a third of
    the daemon's time per call. Otherwise ``send`` runs as usual, so a slow
    reader still gets backpressure and a closing connection its usual handling.
    """
    protocol = ws.protocol
    transport = ws.transport

    async def send(frame: Any) -> None:
        data = dump_frame_bytes(frame)
        if (
            protocol.state is State.OPEN
            and ws.fragmented_send_waiter is None
            and transport.get_write_buffer_size() == 0
            and not transport.is_closing()
        ):
            protocol.send_text(data)
            ws.send_data()
            return
        try:
            await ws.send(data, text=True)
        except ConnectionClosed:
            pass  # the result stays in the replay cache for a reconnecting client

    return send


def _peer(ws: ServerConnection) -> str:
    addr = ws.remote_address
    if isinstance(addr, tuple) and addr:
        return str(addr[0])
    return str(addr)


def _reason(exc: FrameError) -> str:
    if exc.not_json:
        return "not_json"
    if exc.message.startswith("binary"):
        return "binary"
    if exc.message.startswith("frame exceeds"):
        return "too_large"
    if exc.message.startswith("unknown op"):
        return "unknown_op"
    return "invalid"
