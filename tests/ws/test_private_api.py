"""websockets' internals the WebSocket face relies on, beyond its documented API.

exai reads them on the hot path (:mod:`exai.ws.transport`, :mod:`exai.ws.direct_read`,
:mod:`exai.ws.sender`, :mod:`exai.ws.http`); pyproject.toml pins websockets to the
releases these tests passed on, and docs/dependencies.md says why each is used.
An upgrade that renames or removes one fails here, naming it, rather than
somewhere deep in a connection (or, for the parser's shape, silently slower).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import websockets
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

from exai.ws.direct_read import waits_for_a_frame

VERSION = websockets.version.version


def _gone(what: str) -> str:
    return (f"websockets {VERSION}: {what} is gone or changed; exai.ws relies on it "
            "(docs/dependencies.md, 'Private APIs'). Adapt exai.ws or keep the pin.")  # fmt: skip


def _open_protocol() -> ServerProtocol:
    protocol = ServerProtocol(max_size=2**20)
    protocol.state = State.OPEN  # as after the opening handshake
    protocol.parser = protocol.parse()
    next(protocol.parser)
    return protocol


def test_the_sans_io_protocol_keeps_the_attributes_exai_reads():
    protocol = _open_protocol()
    # max_size: read by the direct read and raised after the hello; an int, not the
    # (message, fragment) pair newer releases accept.
    assert isinstance(getattr(protocol, "max_size", None), int), _gone("Protocol.max_size (int)")
    assert protocol.max_size == 2**20, _gone("Protocol.max_size (int)")
    protocol.max_size = 2**21
    assert protocol.max_size == 2**21, _gone("Protocol.max_size (settable)")
    # cur_size: the size of a fragmented message under way, None between messages.
    assert hasattr(protocol, "cur_size") and protocol.cur_size is None, _gone("Protocol.cur_size")
    assert isinstance(getattr(protocol, "reader", None), StreamReader), _gone("Protocol.reader")
    assert hasattr(protocol.reader, "buffer"), _gone("StreamReader.buffer")
    for name in ("parser_exc", "writes", "debug", "extensions"):
        assert hasattr(protocol, name), _gone(f"Protocol.{name}")


def test_the_parser_still_waits_at_a_frame_boundary_as_exai_reads_it():
    """The direct read knows the parser waits for a frame's first byte from the
    generators it is suspended in: Protocol.parse, inside StreamReader.at_eof."""
    assert inspect.isgeneratorfunction(Protocol.parse), _gone("Protocol.parse (a generator)")
    assert inspect.isgeneratorfunction(StreamReader.at_eof), _gone("StreamReader.at_eof")
    protocol = _open_protocol()
    assert hasattr(protocol.parser, "gi_yieldfrom"), _gone("Protocol.parser (a generator)")
    assert waits_for_a_frame(protocol), _gone("the parser's shape at a frame boundary")
    protocol.receive_data(Frame(Opcode.TEXT, b"part", fin=False).serialize(mask=True))
    assert protocol.cur_size == 4, _gone("Protocol.cur_size during a fragmented message")
    assert not waits_for_a_frame(protocol)


def test_the_apply_mask_exai_unmasks_with_is_still_there():
    from websockets import frames

    apply_mask: Any = getattr(frames, "apply_mask", None)
    assert callable(apply_mask), _gone("websockets.frames.apply_mask")
    assert apply_mask(b"\x00\x01", b"\x01\x01\x01\x01") == b"\x01\x00", _gone("apply_mask")


async def test_the_asyncio_connection_keeps_the_attributes_exai_uses():
    seen: dict[str, Any] = {}

    names = (
        "protocol", "transport", "fragmented_send_waiter", "connection_lost_waiter", "request",
        "send_data", "process_event", "data_received", "pause_writing", "resume_writing",
        "connection_lost",
    )  # fmt: skip

    async def handler(ws: ServerConnection) -> None:
        seen.update({name: hasattr(ws, name) for name in names})
        seen["fragmented_send_waiter is None"] = getattr(ws, "fragmented_send_waiter", 0) is None
        seen["connection_lost_waiter is a future"] = isinstance(
            getattr(ws, "connection_lost_waiter", None), asyncio.Future
        )
        await ws.send("ok")

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}") as client:
            assert await client.recv() == "ok"
    missing = [name for name, present in seen.items() if not present]
    assert not missing, _gone(f"ServerConnection: {', '.join(missing)}")
