"""Frames out: straight into the transport when nothing waits in its buffer.

:class:`FrameSender` writes a connection's protocol frames. When the
connection is open and nothing waits in its write buffer, a frame is written to
the transport at once, framed as websockets would frame it; otherwise
websockets' ``send`` runs as usual, so a slow reader gets backpressure and a
closing connection its usual handling. Whether a fragmented send is under way
is read from websockets' ``ServerConnection.fragmented_send_waiter``, a private
attribute pinned and guarded like the others (docs/dependencies.md).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from exai.protocol import dump_frame_bytes

__all__ = ["FrameSender", "text_header"]


def text_header(length: int) -> bytes:
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
                transport.write(text_header(len(data)) + data)
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
