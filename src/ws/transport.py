"""The daemon's side of a WebSocket: messages in as they arrive, with backpressure.

:class:`ExaiConnection` is the ``ServerConnection`` the daemon's server creates.
websockets normally queues every incoming message for a task that reads it with
``recv()``; here each complete message is handed to the connection's handler
straight from the protocol callback that parsed it, in order, with no queue and
no task to wake per message. On the echo path that wake-up cost the daemon
about as much as everything else it does per call. The handler must not block
(it parses the frame and starts a task for a call); the first message, the
``hello``, is still awaited by a coroutine, through :meth:`ExaiConnection.first_message`.
After the ``hello``, with no extension on, a whole text frame that arrives while
websockets' parser waits for the next frame is read by exai itself
(:mod:`exai.ws.direct_read`).

Until the ``hello`` succeeds, a client may send nothing larger than the small
limit the server was started with: not the upgrade request (websockets' own
limits let one reach a megabyte of headers), and not a message (websockets
checks that on the frame header, and on the decompressed size when
permessage-deflate is on, before buffering the payload).
:meth:`ExaiConnection.allow_messages_up_to` raises the limit for a client that
has logged in, through websockets' ``Protocol.max_size`` (private; pinned and
guarded, see docs/dependencies.md). A connection that has ended lets go of what
it buffered at once, because the connection object itself may linger in
reference cycles.

Backpressure still holds, in the other direction: when a client stops reading
and the daemon's output backs up past the transport's high-water mark, the
connection stops reading that client's input until the output drains, so a
client cannot make the daemon take on work it does not collect.

Frames go out through :class:`exai.ws.sender.FrameSender`; websockets' log
lines through :class:`exai.ws.websockets_log.WebsocketsLog`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import State

from exai.ws.direct_read import take_messages, waits_for_a_frame

__all__ = ["ExaiConnection", "Message"]

Message = str | bytes  # a text message, or a binary one (which the daemon refuses)

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
_EARLY_MAX = 16  # messages kept before the handshake is done; then reading pauses


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
        handler = self._handler
        if self._direct and handler is not None and waits_for_a_frame(self.protocol):
            data = take_messages(self.protocol, data, handler)
            if not data:
                return
        super().data_received(data)

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


def _drop_tracebacks(exc: BaseException | None) -> None:
    """Let go of the frames (and their locals) the tracebacks of ``exc`` and its causes hold."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__
