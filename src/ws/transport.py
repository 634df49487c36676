"""The daemon's side of a WebSocket: messages in as they arrive, frames out at once.

:class:`ExaiConnection` is the ``ServerConnection`` the daemon's server creates.
websockets normally queues every incoming message for a task that reads it with
``recv()``; here each complete message is handed to the connection's handler
straight from the protocol callback that parsed it, in order, with no queue and
no task to wake per message. On the echo path that wake-up cost the daemon
about as much as everything else it does per call. The handler must not block
(it parses the frame and starts a task for a call); the first message, the
``hello``, is still awaited by a coroutine, through :meth:`ExaiConnection.first_message`.
After the ``hello``, with no extension on, a whole text frame that arrives while
websockets' parser waits for the next frame is read by exai itself (unmasked and
checked as websockets checks it): websockets' generator-based parser takes 3.4 µs
a message in a loop, this 0.6 µs. Everything else (control frames, fragments, a
frame cut across reads, an error to close on) is websockets' to parse.

Until the ``hello`` succeeds, a client may send nothing larger than the small
limit the server was started with: not the upgrade request (websockets' own
limits let one reach a megabyte of headers), and not a message (websockets
checks that on the frame header, and on the decompressed size when
permessage-deflate is on, before buffering the payload).
:meth:`ExaiConnection.allow_messages_up_to` raises the limit for a client that
has logged in. A connection that has ended lets go of what it buffered at
once, because the connection object itself may linger in reference cycles.

Backpressure still holds, in the other direction: when a client stops reading
and the daemon's output backs up past the transport's high-water mark, the
connection stops reading that client's input until the output drains, so a
client cannot make the daemon take on work it does not collect.

:class:`FrameSender` writes frames: straight into the transport when nothing is
waiting in its buffer, else through ``send``, which waits for the buffer to drain.

:class:`WebsocketsLog` puts websockets' own log lines into the daemon's log.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from websockets import frames as ws_frames
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Protocol, State
from websockets.streams import StreamReader

from exai.logs import get_logger
from exai.protocol import dump_frame_bytes

__all__ = ["ExaiConnection", "FrameSender", "Message", "WebsocketsLog"]

Message = str | bytes  # a text message, or a binary one (which the daemon refuses)

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
_EARLY_MAX = 16  # messages kept before the handshake is done; then reading pauses
# websockets' own unmasking (its C speedup when built, else its pure-Python one).
_apply_mask = ws_frames.apply_mask
_FRAME_LOOP = Protocol.parse.__code__
_AT_A_BOUNDARY = StreamReader.at_eof.__code__


class ExaiConnection(ServerConnection):
    # Connections of this process that have ended: what the heap keeper needs to
    # know when to collect the cycles they leave (exai.ws.heap). Process-wide,
    # as the garbage collector is.
    ended = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handler: Callable[[Message], None] | None = None
        self._early: list[Message] = []  # arrived before a handler was set
        self._arrived: asyncio.Future[None] | None = None
        self._fragments: list[Frame] | None = None
        self._output_full = False
        # Whether whole text frames may be read by exai (see _take_messages): after
        # the hello, when no extension and no debug logging needs websockets' parser.
        self._direct = False
        # Until the upgrade request is in, what arrives goes through _receive_request,
        # which caps it; then this instance attribute is deleted and data_received
        # below takes every later byte.
        limit = self.protocol.max_size
        self._request_room: int = limit if limit is not None else sys.maxsize
        self.data_received = self._receive_request  # type: ignore[method-assign]

    # --- incoming -------------------------------------------------------------

    def _receive_request(self, data: bytes) -> None:
        room = self._request_room
        self._request_room = room - len(data)
        super().data_received(data if len(data) <= room else data[:room])
        if self.request is not None:
            del self.data_received
            if len(data) > room:
                self.data_received(data[room:])
        elif len(data) >= room:
            # What websockets does with a request it cannot parse: end the connection.
            self.transport.close()

    async def first_message(self) -> Message:
        """The first message; raises ``ConnectionClosed`` if the connection ends first.

        Messages that arrive after it are kept until :meth:`serve_messages` says
        who takes them; past a few, reading pauses and the rest wait in the socket.
        """
        if not self._early:
            if self.protocol.state is not State.OPEN:
                raise self.protocol.close_exc
            self._arrived = self.loop.create_future()
            try:
                await self._arrived
            finally:
                self._arrived = None
        return self._early.pop(0)

    def allow_messages_up_to(self, max_size: int) -> None:
        """Accept messages of up to ``max_size`` bytes from now on.

        websockets reads ``max_size`` when the first bytes of a frame arrive,
        before parsing its header, so the new limit holds for every frame whose
        first byte arrives after this call: a client that waits for its
        ``hello_ack`` before sending more gets the new limit for all of it.
        """
        self.protocol.max_size = max_size

    def serve_messages(self, handler: Callable[[Message], None]) -> None:
        """Hand every further message to ``handler``, those already read first."""
        self._handler = handler
        protocol = self.protocol
        self._direct = not protocol.extensions and not protocol.debug
        early, self._early = self._early, []
        for message in early:
            handler(message)
        if not self._output_full:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self._direct and self._handler is not None and _waits_for_a_frame(self.protocol):
            data = self._take_messages(data)
            if not data:
                return
        super().data_received(data)

    def _take_messages(self, data: bytes) -> bytes:
        """Hand each whole text message at the start of ``data`` to the handler, read
        by exai; return the rest (from the first byte that is anything else) for
        websockets to parse.

        Called only while websockets' parser waits for the first byte of a frame with
        nothing buffered, so ``data`` starts at a frame's first byte. A frame is read
        here only when it is an unfragmented, masked text frame with no reserved bit,
        within the size limit, complete in ``data`` and valid UTF-8: what websockets
        would accept and hand over as one message, byte for byte. Anything else (a
        control or binary frame, a fragment, a frame cut short, an error to close
        on) goes to websockets from its first byte, so its checks and answers are
        unchanged; once it holds part of a frame, the direct path waits until it
        has parsed that frame whole.
        """
        protocol = self.protocol
        max_size = protocol.max_size
        size = len(data)
        pos = 0
        while size - pos >= 6 and protocol.state is State.OPEN:
            if data[pos] != 0x81:  # FIN and the text opcode, no reserved bit
                break
            length = data[pos + 1] ^ 0x80  # the mask bit must be set
            start = pos + 2
            if length == 126:
                length = int.from_bytes(data[start : start + 2], "big")
                start += 2
            elif length == 127:
                length = int.from_bytes(data[start : start + 8], "big")
                start += 8
            elif length > 127:
                break  # not masked: websockets fails the connection
            end = start + 4 + length
            if end > size or (max_size is not None and length > max_size):
                break
            try:
                text = str(_apply_mask(data[start + 4 : end], data[start : start + 4]), "utf-8")
            except UnicodeDecodeError:
                break
            pos = end
            self._handler(text)  # type: ignore[misc]  # set: checked by the caller
        return data[pos:] if pos else data

    def process_event(self, event: Any) -> None:
        if not isinstance(event, Frame) or event.opcode not in _DATA:
            super().process_event(event)  # the opening handshake, pings, pongs, close
            return
        message = self._assemble(event)
        if message is None:
            return
        if self._handler is not None:
            self._handler(message)
            return
        self._early.append(message)
        if len(self._early) >= _EARLY_MAX:
            self.transport.pause_reading()
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    def _assemble(self, frame: Frame) -> Message | None:
        """The message ``frame`` completes, or None while a fragmented one is incomplete.

        websockets has checked the framing already (continuations only inside a
        fragmented message, the message size within ``max_size``).
        """
        if frame.opcode is Opcode.CONT:
            assert self._fragments is not None
            self._fragments.append(frame)
            if not frame.fin:
                return None
            frames, self._fragments = self._fragments, None
            data: Any = b"".join(f.data for f in frames)
            text = frames[0].opcode is Opcode.TEXT
        elif not frame.fin:
            self._fragments = [frame]
            return None
        else:
            data, text = frame.data, frame.opcode is Opcode.TEXT
        if not text:
            return bytes(data)
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as exc:
            # What websockets does when recv() meets invalid UTF-8: close with 1007.
            self.protocol.fail(CloseCode.INVALID_DATA, f"{exc.reason} at position {exc.start}")
            self.send_data()
            return None

    async def close(self, code: int = CloseCode.NORMAL_CLOSURE, reason: str = "") -> None:
        # The closing handshake needs the client's close frame: read it even if
        # reading was paused for backpressure.
        self.transport.resume_reading()
        await super().close(code, reason)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        ExaiConnection.ended += 1
        # The connection and its websockets protocol sit in reference cycles (the
        # protocol's parser is a generator that refers to it) that only a full
        # garbage collection frees, which in a quiet daemon may not come for a long
        # time; what they buffered must not wait for it. That is a message half
        # assembled, and what the parser's generators held when the stream ended
        # (the last frame, or the headers of an upgrade request read so far): their
        # locals, reachable from the tracebacks of the exceptions that ended them.
        self._fragments = None
        self._early.clear()
        _drop_tracebacks(self.protocol.parser_exc)
        _drop_tracebacks(self.protocol.handshake_exc)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_exception(self.protocol.close_exc)

    # --- outgoing backpressure --------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        self._output_full = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._output_full = False
        if self._handler is not None:
            self.transport.resume_reading()


def _waits_for_a_frame(protocol: Any) -> bool:
    """Whether websockets' parser waits for the first byte of a frame, nothing buffered.

    Read from the generators it is suspended in: the frame loop, waiting in the
    stream reader's end-of-stream check (where it waits only with an empty
    buffer). Mid-frame it waits in a read of the frame's bytes instead, and the
    buffer may be empty there too. Any other shape (another websockets version,
    the parser replaced after a close) reads as not waiting: websockets parses.
    """
    if protocol.reader.buffer or protocol.cur_size is not None or protocol.state is not State.OPEN:
        return False
    outer, inner = None, protocol.parser
    while inner.gi_yieldfrom is not None:
        outer, inner = inner, inner.gi_yieldfrom
    return inner.gi_code is _AT_A_BOUNDARY and outer is not None and outer.gi_code is _FRAME_LOOP


def _drop_tracebacks(exc: BaseException | None) -> None:
    """Let go of the frames (and their locals) the tracebacks of ``exc`` and its causes hold."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__


def _text_header(length: int) -> bytes:
    """The header of an unmasked, unfragmented text frame (RFC 6455, section 5.2)."""
    if length < 126:
        return bytes((0x81, length))
    if length < 65536:
        return b"\x81\x7e" + length.to_bytes(2, "big")
    return b"\x81\x7f" + length.to_bytes(8, "big")


class FrameSender:
    """Sends protocol frames on one connection; frames for a closed one are dropped.

    When the connection is open and nothing waits in its write buffer, a frame is
    written to the transport directly: framed as websockets would frame it, or
    handed to the websockets protocol when an extension or a queued frame asks
    for that, without the asynchronous context manager and drain around
    ``send``. Otherwise ``send`` runs as usual, so a slow reader gets
    backpressure and a closing connection its usual handling.
    """

    def __init__(self, ws: ServerConnection, spawn: Callable[[Coroutine[Any, Any, None]], None]):
        self._ws = ws
        self._protocol = ws.protocol
        self._transport = ws.transport
        self._spawn = spawn

    def _write_now(self, data: bytes) -> bool:
        ws, protocol, transport = self._ws, self._protocol, self._transport
        if (
            protocol.state is State.OPEN
            and ws.fragmented_send_waiter is None
            and transport.get_write_buffer_size() == 0
            and not transport.is_closing()
        ):
            if protocol.extensions or protocol.writes or protocol.debug:
                protocol.send_text(data)
                ws.send_data()
            else:
                # What send_text would queue and send_data write, in one step: a
                # server's frame is not masked, so with no extension (no compression)
                # a whole text message is a 2-to-10-byte header and the payload.
                transport.write(_text_header(len(data)) + data)
            return True
        return False

    async def _send(self, data: bytes) -> None:
        try:
            await self._ws.send(data, text=True)
        except ConnectionClosed:
            pass  # a call's result stays in the replay cache for a reconnecting client

    async def __call__(self, frame: Any) -> None:
        """Send ``frame`` (a model, or one serialized already), waiting for room if needed."""
        data = frame if isinstance(frame, bytes) else dump_frame_bytes(frame)
        if not self._write_now(data):
            await self._send(data)

    def now(self, data: bytes) -> bool:
        """Send ``data`` (a serialized frame) if it can go out at once; False if not."""
        return self._write_now(data)

    def post(self, frame: Any) -> None:
        """Send ``frame`` without waiting: now, or from a task of its own."""
        data = frame if isinstance(frame, bytes) else dump_frame_bytes(frame)
        if not self._write_now(data):
            self._spawn(self._send(data))


class WebsocketsLog(logging.LoggerAdapter[logging.Logger]):
    """websockets' log lines (``serve(logger=...)``), written by the daemon's logger.

    Left to itself, websockets writes through Python's last-resort handler, as
    plain text: "opening handshake failed" at error level with three chained
    tracebacks whenever a client leaves before completing an upgrade request or
    sends one that is not valid (a port probe, a load balancer's TCP check, or
    anyone with a socket, as often as they like). That is the client's doing (an
    invalid request is answered with 400; one that was cut short has nobody to
    tell): one debug line naming the cause. Anything else at warning level or
    above is logged as it is, traceback included; below that, nothing.
    """

    def __init__(self) -> None:
        super().__init__(logging.getLogger("websockets.server"), {})
        self._into = get_logger("exai.websockets")

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level < logging.WARNING:
            return
        text = str(msg) % args if args else str(msg)
        exc = sys.exc_info()[1] if kwargs.get("exc_info") else None
        if isinstance(exc, InvalidHandshake):
            self._into.debug(text, error=_causes(exc))
        elif level >= logging.ERROR:
            self._into.error(text, exc_info=exc is not None)
        else:
            self._into.warning(text)


def _causes(exc: BaseException) -> str:
    """``exc`` and what caused it, one line: "did not receive a valid HTTP request; ..."."""
    parts: list[str] = []
    cause: BaseException | None = exc
    while cause is not None and len(parts) < 4:
        parts.append(str(cause) or type(cause).__name__)
        cause = cause.__cause__
    return "; ".join(parts)
