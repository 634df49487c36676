"""One WebSocket connection: the ``hello`` handshake, then the frame loop.

The handshake enforces the contract's close codes (4000 first frame not JSON,
4001 not ``hello``, 4002 hello timeout, 4003 unauthorized, also when the address
has failed to log in too often; see :mod:`exai.admission`). Only a
successful ``hello`` lifts the connection's frame limit from the size of a hello
to the configured one. After it, every message is handled as it arrives (see
:mod:`exai.ws.transport`): parsed by the protocol module, a frame that
cannot be accepted answered with an ``error`` frame while the connection keeps
serving. ``call_tool`` is handed to the dispatcher, which runs it in its own
task, so the next frame, including a ``cancel`` for a call still running, is
read and honoured at once.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed

from exai import __version__, tracing
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
    parse_client_frame,
)
from exai.tracing import state as tracing_state
from exai.ws.sender import FrameSender
from exai.ws.transport import ExaiConnection, Message

if TYPE_CHECKING:
    from exai.port import Port
    from exai.port import SessionHandle as Session
    from exai.ws.open_connections import OpenConnections

__all__ = ["ConnectionHandler"]

log = get_logger("exai.daemon")

# Bad frames are logged individually up to this many per connection, then counted,
# so a client flooding garbage cannot flood the log.
_LOGGED_REJECTS = 10


class ConnectionHandler:
    def __init__(self, core: Port, connections: OpenConnections) -> None:
        self.core = core
        self.connections = connections
        self.settings = core.settings

    async def __call__(self, ws: ExaiConnection) -> None:
        connections = self.connections
        peer = _peer(ws)
        connections.opened(ws, peer)
        session: Session | None = None
        try:
            session = await self._handshake(ws, peer)
            if session is not None:
                frames = _Frames(self, session)
                ws.serve_messages(frames.handle)
                await ws.wait_closed()
                frames.closed()
        except ConnectionClosed:
            pass
        finally:
            connections.closed(ws, peer)
            if session is not None and session.connection is ws:
                session.connection = None
                session.send = None
                self.core.emit("connection_closed", session_id=session.id,
                             principal=session.principal.name, peer=peer)  # fmt: skip

    # --- handshake ------------------------------------------------------------

    async def _handshake(self, ws: ExaiConnection, peer: str) -> Session | None:
        d = self.core
        try:
            async with asyncio.timeout(self.settings.hello_timeout_s):
                raw = await ws.first_message()
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
        wait_s = d.admission.login_wait_s(peer)
        if wait_s > 0:
            # Not audited or logged one by one: this is what a guessing flood looks like.
            d.metrics.auth_failures.labels("throttled").inc()
            await self._refuse(ws, ErrorCode.RATE_LIMITED,
                               f"too many failed logins from {peer}; try again in {wait_s:.0f} s",
                               CloseCode.UNAUTHORIZED, retry_after_s=round(wait_s, 3))  # fmt: skip
            return None
        try:
            principal = d.auth.authenticate(frame.token)
            session, resumed = await d.open_session(principal, frame.session_id)
        except UnauthorizedError as exc:
            d.metrics.auth_failures.labels(exc.message.split(":")[0][:40]).inc()
            d.emit("auth_failed", peer=peer, reason=exc.message)
            log.info("hello refused", peer=peer, reason=exc.message)
            if d.admission.login_failed(peer):
                log.warning("failed logins throttled", peer=peer,
                            retry_after_s=round(d.admission.login_wait_s(peer), 3))  # fmt: skip
            await self._refuse(ws, ErrorCode.UNAUTHORIZED, exc.message, CloseCode.UNAUTHORIZED)
            return None

        previous = session.connection
        if previous is not None and previous is not ws:
            # The client came back on a new socket; the old one is stale.
            d.spawn(previous.close(CloseCode.NORMAL, "session resumed elsewhere"))
        s = self.settings
        d.admission.release(ws)
        ws.allow_messages_up_to(s.max_frame_bytes * 2)
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
        session.send = FrameSender(ws, d.spawn)
        client = frame.client
        # The MCP stdio shim reaches the core over this socket; its calls are MCP's.
        session.client = client.name[:128] if client else None
        session.face = "mcp" if session.client == "exai-shim" else "ws"
        d.emit("connection_opened", session_id=session.id, principal=principal.name,
                     client_name=client.name if client else None,
                     client_version=client.version if client else None,
                     peer=peer, resumed=resumed)  # fmt: skip
        log.debug("session open", session_id=session.id, principal=principal.name,
                  resumed=resumed, peer=peer)  # fmt: skip
        return session

    async def _refuse(
        self,
        ws: ExaiConnection,
        code: ErrorCode,
        message: str,
        close: CloseCode,
        retry_after_s: float | None = None,
    ) -> None:
        error = ErrorInfo(code=code, message=message, retryable=retry_after_s is not None,
                          retry_after_s=retry_after_s)  # fmt: skip
        ack = HelloAck(ok=False, error=error)
        try:
            await ws.send(dump_frame(ack))
        finally:
            await ws.close(close, message[:120])


class _Frames:
    """Handles the messages of one connection after its handshake, one by one as they arrive.

    Called from the connection's protocol callback, so nothing here may wait:
    a call runs in a task of its own, and every answer is posted (sent now, or
    from a task when the client's buffer is full).
    """

    def __init__(self, handler: ConnectionHandler, session: Session) -> None:
        self.core = handler.core
        self.submit = handler.core.submit
        self.session = session
        self.limit = handler.settings.max_frame_bytes
        self.rejects = 0
        self.log = log.bind(session_id=session.id)

    def handle(self, raw: Message) -> None:
        try:
            if isinstance(raw, bytes):
                raise FrameError("binary frames are not accepted; send JSON text frames")
            limit = self.limit
            if len(raw) * 4 > limit and len(raw.encode()) > limit:
                raise FrameError(f"frame exceeds max_frame_bytes ({limit} bytes)")
            frame = parse_client_frame(raw)
            if isinstance(frame, CallToolFrame):
                if tracing_state.tracer is None:
                    self.submit(self.session, frame, raw)
                else:
                    self._traced(frame, raw)
            else:
                self._other(frame)
        except FrameError as exc:
            self.rejects += 1
            self.core.metrics.frames_rejected.labels(_reason(exc)).inc()
            if self.rejects <= _LOGGED_REJECTS:
                self.log.info("frame rejected", request_id=exc.request_id, reason=exc.message)
            self.session.post(exc.to_frame())
        except Exception as exc:  # a bug must cost one frame, not the connection
            self.log.exception("frame handling failed")
            err = FrameError(f"internal error: {type(exc).__name__}", code=ErrorCode.INTERNAL_ERROR)
            self.session.post(err.to_frame())

    def _traced(self, frame: CallToolFrame, raw: str) -> None:
        """Submit a call under this face's span, which the frame's ``traceparent``
        parents and which ends when the call's task does (its result sent)."""
        session = self.session
        name = frame.name
        tracing.serve(f"call_tool {name}",
                      {"exai.face": "websocket", "network.protocol.name": "websocket",
                       "gen_ai.tool.name": name, "exai.session.id": session.id,
                       "exai.request.id": frame.request_id,
                       "exai.principal": session.principal.name},
                      frame.traceparent, frame.tracestate,
                      self.submit, session, frame, raw)  # fmt: skip

    def _other(self, frame: Any) -> None:
        core, session = self.core, self.session
        if isinstance(frame, ListToolsFrame):
            tools = core.tools(session.principal)
            session.post(ListToolsResult(request_id=frame.request_id, tools=tools))
        elif isinstance(frame, CancelFrame):
            if not core.cancel(session, frame.request_id) and (
                session.replay(frame.request_id) is None
            ):
                raise FrameError(
                    f"no call {frame.request_id!r} is running in this session",
                    request_id=frame.request_id,
                )
        elif isinstance(frame, PingFrame):
            session.post(PongFrame(request_id=frame.request_id))
        elif isinstance(frame, HelloFrame):
            raise FrameError("hello was already received on this connection")
        else:  # pragma: no cover - the protocol module admits no other frame
            raise FrameError(f"unsupported op {getattr(frame, 'op', '?')!r}")

    def closed(self) -> None:
        if self.rejects > _LOGGED_REJECTS:
            self.log.info("frames rejected on this connection", count=self.rejects)


def _peer(ws: ExaiConnection) -> str:
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
