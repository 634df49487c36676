"""How messages reach the daemon: pipelined after hello, held back by a client that won't
read, and let go of when the connection is lost.

The daemon handles each message straight from the protocol callback; these
check the two things a queue used to give for free: order (frames sent right
behind the hello, before its ack, are served in order once the session is
open) and backpressure (a client that stops reading its answers cannot make
the daemon go on reading, and working on, its requests).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import tracemalloc

from websockets.asyncio.client import connect
from websockets.frames import CloseCode, Frame, Opcode

from tests.reliability.harness import client_frame, open_raw_websocket, wait_until


async def test_frames_pipelined_behind_hello_are_served_in_order(daemon_factory):
    daemon = await daemon_factory()
    async with connect(daemon.url) as ws:
        # Everything in one go, without waiting for hello_ack.
        await ws.send(json.dumps({"op": "hello"}))
        for i in range(5):
            await ws.send(json.dumps({"op": "call_tool", "request_id": f"r{i}", "name": "echo",
                                      "arguments": {"text": f"t{i}"}}))  # fmt: skip
        await ws.send(json.dumps({"op": "ping", "request_id": "p"}))
        frames = [json.loads(await ws.recv()) for _ in range(7)]
    assert frames[0]["op"] == "hello_ack" and frames[0]["ok"] is True
    # Calls may finish in any order in general; these finish in their first step,
    # so they are answered in the order they were read.
    results = [f for f in frames if f["op"] == "call_tool_res"]
    assert [f["outputs"][0]["text"] for f in results] == [f"t{i}" for i in range(5)]
    assert {"op": "pong", "request_id": "p"} in frames


async def test_a_client_that_stops_reading_stops_being_read(daemon_factory):
    # Results big enough to back up quickly, and sent whole rather than spilled.
    daemon = await daemon_factory(
        max_inflight_per_session=10_000, max_result_tokens=10**8, rate_limit_per_min=0
    )
    text = "x" * 65_536
    total = 1_000  # ~65 MB each way: more than the sockets' buffers hold
    sent = 0
    # Small buffers on the client's side; the daemon's receive buffer may still grow
    # to tcp_rmem's maximum (32 MB here) before the client feels anything.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65_536)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65_536)
    sock.connect(("127.0.0.1", daemon.port))
    sock.setblocking(False)
    async with connect(daemon.url, sock=sock, max_size=None, max_queue=1) as ws:
        await ws.send(json.dumps({"op": "hello"}))
        assert json.loads(await ws.recv())["ok"] is True

        async def flood() -> None:
            nonlocal sent
            for i in range(total):
                frame = {"op": "call_tool", "request_id": f"r{i}", "name": "echo",
                         "arguments": {"text": text}}  # fmt: skip
                await ws.send(json.dumps(frame))
                sent += 1

        sender = asyncio.create_task(flood())
        await asyncio.sleep(1.0)
        # The daemon stopped reading once its answers backed up, so sending stalled.
        assert not sender.done() and sent < total
        stalled_at = sent
        await asyncio.sleep(0.5)
        assert sent == stalled_at

        # Reading again lets everything through: every call is answered.
        seen = set()
        while len(seen) < total:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if frame["op"] == "call_tool_res":
                assert frame["error"] is None
                seen.add(frame["request_id"])
        await sender
    assert seen == {f"r{i}" for i in range(total)}


async def test_a_message_cut_off_by_a_lost_connection_is_let_go_at_once(daemon_factory):
    # With the garbage collector off, memory a lost connection still holds on to
    # shows: the connection object lives on in reference cycles until a full
    # collection, which a quiet daemon may not run for a long time.
    daemon = await daemon_factory(max_frame_bytes=16 * 1024 * 1024)
    reader, writer = await open_raw_websocket(daemon.port)
    writer.write(client_frame(json.dumps({"op": "hello"})))
    await reader.readuntil(b'"ok":true')  # the limit is raised once hello has succeeded
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        chunk = b"x" * (1024 * 1024)
        writer.write(Frame(Opcode.TEXT, chunk, fin=False).serialize(mask=True))
        for _ in range(7):
            writer.write(Frame(Opcode.CONT, chunk, fin=False).serialize(mask=True))
            await writer.drain()
        del chunk
        await wait_until(
            lambda: tracemalloc.get_traced_memory()[0] - before >= 8 * 1024 * 1024,
            10,
            "the daemon has read all eight fragments",
        )
        writer.transport.abort()
        await wait_until(lambda: not daemon.ws.connections, 10, "the connection is gone")
        await asyncio.sleep(0.1)  # the callbacks connection_lost scheduled
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gc.enable()
    assert held < 1024 * 1024, f"{held} bytes still held"


def test_a_frame_written_directly_is_the_frame_websockets_would_write():
    """Results go out framed by exai when no extension is on: the bytes must be the same."""
    from exai.ws.sender import text_header as _text_header

    for length in (0, 1, 125, 126, 127, 65535, 65536, 70000):
        data = b"x" * length
        expected = Frame(Opcode.TEXT, data).serialize(mask=False, extensions=[])
        assert _text_header(length) + data == expected, length


async def test_results_of_every_header_size_reach_a_real_client(daemon_factory, client_factory):
    daemon = await daemon_factory(max_result_tokens=1_000_000)  # nothing is paged
    client = await client_factory(daemon)
    for length in (10, 200, 70_000):  # a 1-byte, a 2-byte and an 8-byte length
        result = await client.call("echo", {"text": "é" * length})
        assert result.outputs[0].text == "é" * length


async def test_with_compression_on_results_still_go_through_websockets(daemon_factory):
    """permessage-deflate changes the frame; the direct path must step aside for it."""
    daemon = await daemon_factory(ws_compression=True)
    async with connect(daemon.url, compression="deflate") as ws:
        assert ws.protocol.extensions  # deflate was negotiated
        await ws.send(json.dumps({"op": "hello"}))
        json.loads(await ws.recv())
        await ws.send(json.dumps({"op": "call_tool", "request_id": "z", "name": "echo",
                                  "arguments": {"text": "y" * 5000}}))  # fmt: skip
        answer = json.loads(await ws.recv())
        assert answer["op"] == "call_tool_res" and answer["outputs"][0]["text"] == "y" * 5000


# --- messages read by exai (ExaiConnection._take_messages) -----------------------------


def _masked(payload: bytes, *, head: int = 0x81, length_bytes: int | None = None) -> bytes:
    """A client frame with its length written in ``length_bytes`` bytes (0, 2 or 8),
    not necessarily the fewest: RFC 6455 asks for the fewest, and websockets accepts more."""
    n = len(payload)
    if length_bytes is None:
        length_bytes = 0 if n < 126 else 2 if n < 65536 else 8
    if length_bytes == 0:
        header = bytes((head, 0x80 | n))
    else:
        header = bytes((head, 0x80 | (126 if length_bytes == 2 else 127)))
        header += n.to_bytes(length_bytes, "big")
    mask = os.urandom(4)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One frame from the daemon (unmasked): its opcode and payload."""
    head = await reader.readexactly(2)
    n = head[1] & 0x7F
    if n >= 126:
        n = int.from_bytes(await reader.readexactly(2 if n == 126 else 8), "big")
    return head[0] & 0x0F, await reader.readexactly(n)


async def _logged_in(daemon) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await open_raw_websocket(daemon.port)
    writer.write(client_frame(json.dumps({"op": "hello"})))
    opcode, payload = await _read_frame(reader)
    assert opcode == Opcode.TEXT and json.loads(payload)["ok"] is True
    return reader, writer


def _echo_call(rid: str, text: str) -> bytes:
    return json.dumps({"op": "call_tool", "request_id": rid, "name": "echo",
                       "arguments": {"text": text}}).encode()  # fmt: skip


async def test_messages_are_read_whole_however_the_stream_cuts_them(daemon_factory):
    """Several frames in one read, a frame cut anywhere (in its header, its length, its
    mask, its payload), a control frame between messages, lengths written in more bytes
    than needed: every message is answered once, in order, with its text intact, and the
    ping is answered."""
    daemon = await daemon_factory(max_result_tokens=1_000_000)
    reader, writer = await _logged_in(daemon)
    try:
        texts = ["a", "é" * 100, "b" * 70_000, "c", "d"]
        for cut_round, cuts in enumerate([(), (1,), (2,), (3,), (5,), (6,), (7,), (30,),
                                          (41, 45, 47, 49, 60), (300, 75_000)]):  # fmt: skip
            rids = [f"s{cut_round}-{i}" for i in range(len(texts))]
            wire = (
                _masked(_echo_call(rids[0], texts[0]))
                + _masked(_echo_call(rids[1], texts[1]))
                + client_frame(b"beat", Opcode.PING)
                + _masked(_echo_call(rids[2], texts[2]))
                + _masked(_echo_call(rids[3], texts[3]), length_bytes=2)
                + _masked(_echo_call(rids[4], texts[4]), length_bytes=8)
            )
            start = 0
            for cut in (*cuts, len(wire)):
                writer.write(wire[start:cut])
                await writer.drain()
                await asyncio.sleep(0.01)  # its own segment, read on its own
                start = cut
            seen = []
            for _ in range(len(texts) + 1):
                opcode, payload = await asyncio.wait_for(_read_frame(reader), 10)
                if opcode == Opcode.PONG:
                    seen.append(("pong", payload.decode()))
                else:
                    frame = json.loads(payload)
                    assert frame["error"] is None, frame
                    seen.append((frame["request_id"], frame["outputs"][0]["text"]))
            # websockets answers a ping as it parses it, before the calls read with it
            # have run: the pong may come first, the results come in order.
            assert ("pong", "beat") in seen, cuts
            seen.remove(("pong", "beat"))
            assert seen == list(zip(rids, texts, strict=True)), cuts
    finally:
        writer.close()


async def test_frames_websockets_refuses_are_still_refused_behind_good_messages(daemon_factory):
    """A good message, a frame that breaks the protocol, another message, in one write:
    the connection is closed with the code websockets gives, and nothing after the bad
    frame is handled."""
    daemon = await daemon_factory()
    bad_frames = {
        # Unmasked, and shaped to read as a valid text message if taken for masked.
        "unmasked": bytes((0x81, 125)) + b"\x00" * 4 + b" " * 253,
        "a reserved bit": _masked(b"{}", head=0xC1),
        "an unknown opcode": _masked(b"{}", head=0x83),
        "a continuation with nothing to continue": _masked(b"{}", head=0x80),
    }
    for name, bad in bad_frames.items():
        reader, writer = await _logged_in(daemon)
        try:
            writer.write(_masked(_echo_call("ok", "fine")) + bad + _masked(_echo_call("no", "x")))
            answered = []
            while True:
                opcode, payload = await asyncio.wait_for(_read_frame(reader), 10)
                if opcode == Opcode.CLOSE:
                    break
                answered.append(json.loads(payload)["request_id"])
            assert int.from_bytes(payload[:2], "big") == CloseCode.PROTOCOL_ERROR, name
            assert "no" not in answered, name
        finally:
            writer.close()


def test_the_direct_read_waits_while_websockets_holds_part_of_a_frame():
    """websockets' parser can wait with an empty buffer in the middle of a frame (its
    header and mask read, its payload not yet): exai must not read from there."""
    from websockets.protocol import State
    from websockets.server import ServerProtocol

    from exai.ws.direct_read import waits_for_a_frame as _waits_for_a_frame

    protocol = ServerProtocol(max_size=2**20)
    protocol.state = State.OPEN  # as after the opening handshake
    protocol.parser = protocol.parse()
    next(protocol.parser)
    assert _waits_for_a_frame(protocol)

    wire = client_frame("hello")
    protocol.receive_data(wire[:1])  # one byte of the header
    assert not _waits_for_a_frame(protocol)
    protocol.receive_data(wire[1:6])  # header and mask read, nothing buffered
    assert not protocol.reader.buffer and not _waits_for_a_frame(protocol)
    protocol.receive_data(wire[6:])
    assert [f.data for f in protocol.events_received()] == [b"hello"]
    assert _waits_for_a_frame(protocol)

    protocol.receive_data(Frame(Opcode.TEXT, b"part", fin=False).serialize(mask=True))
    assert not _waits_for_a_frame(protocol)  # a fragmented message is under way
    protocol.receive_data(Frame(Opcode.CONT, b"end").serialize(mask=True))
    assert _waits_for_a_frame(protocol)

    protocol.receive_data(Frame(Opcode.CLOSE, b"\x03\xe8").serialize(mask=True))
    assert not _waits_for_a_frame(protocol)  # closing: websockets discards the rest
