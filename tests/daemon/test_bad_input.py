"""Every kind of bad input gets its documented answer while others keep working."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from exai.protocol import CloseCode, ErrorCode, ErrorFrame, parse_server_frame


async def _hello(ws) -> None:  # type: ignore[no-untyped-def]
    await ws.send(json.dumps({"op": "hello"}))
    assert parse_server_frame(await ws.recv()).ok


BAD_FRAMES: list[tuple[str | bytes, str]] = [
    ("{not json", "not valid JSON"),
    ("[1, 2, 3]", "JSON object"),
    ('"just a string"', "JSON object"),
    (json.dumps({"request_id": "x"}), "no 'op'"),
    (json.dumps({"op": "teleport", "request_id": "t1"}), "unknown op"),
    (json.dumps({"op": "call_tool", "request_id": "c1"}), "invalid call_tool"),
    (json.dumps({"op": "call_tool", "request_id": "c2", "name": "echo", "arguments": []}),
     "invalid call_tool"),
    (json.dumps({"op": "call_tool", "request_id": 7, "name": "echo"}), "invalid call_tool"),
    (json.dumps({"op": "call_tool", "request_id": "c3", "name": "echo", "timeout_s": -1}),
     "invalid call_tool"),
    (json.dumps({"op": "cancel"}), "invalid cancel"),
    (json.dumps({"op": "cancel", "request_id": "never-ran"}), "no call"),
    (json.dumps({"op": "hello"}), "already received"),
    (b"\x00\xffbinary", "binary frames"),
    (json.dumps({"op": "ping", "request_id": {"nested": [1]}}), "invalid ping"),
]  # fmt: skip


@pytest.mark.parametrize(("frame", "expected"), BAD_FRAMES)
async def test_bad_frame_gets_error_frame_and_connection_survives(
    daemon_factory, client_factory, frame, expected
):
    daemon = await daemon_factory()
    bystander = await client_factory(daemon)
    async with connect(daemon.url) as ws:
        await _hello(ws)
        await ws.send(frame)
        reply = parse_server_frame(await ws.recv())
        assert isinstance(reply, ErrorFrame)
        assert reply.error.code == ErrorCode.INVALID_REQUEST
        assert expected in reply.error.message
        # The same connection still answers.
        await ws.send(json.dumps({"op": "ping", "request_id": "after"}))
        assert parse_server_frame(await ws.recv()).request_id == "after"
    assert (await bystander.call("echo", {"text": "fine"})).outputs[0].text == "fine"


async def test_error_frame_carries_request_id_when_readable(daemon_factory):
    daemon = await daemon_factory()
    async with connect(daemon.url) as ws:
        await _hello(ws)
        await ws.send(json.dumps({"op": "call_tool", "request_id": "mine"}))
        reply = parse_server_frame(await ws.recv())
        assert reply.request_id == "mine"
        assert reply.error.details["fields"][0]["field"] == "call_tool.name"


async def test_oversized_frame_gets_error_frame(daemon_factory, client_factory):
    daemon = await daemon_factory(max_frame_bytes=4096)
    bystander = await client_factory(daemon)
    async with connect(daemon.url, max_size=None) as ws:
        await _hello(ws)
        big = json.dumps({"op": "call_tool", "request_id": "big", "name": "echo",
                          "arguments": {"text": "x" * 6000}})  # fmt: skip
        await ws.send(big)
        reply = parse_server_frame(await ws.recv())
        assert reply.error.code == ErrorCode.INVALID_REQUEST
        assert "max_frame_bytes" in reply.error.message
    assert (await bystander.call("echo", {"text": "ok"})).error is None


async def test_far_oversized_frame_closes_1009(daemon_factory, client_factory):
    daemon = await daemon_factory(max_frame_bytes=4096)
    bystander = await client_factory(daemon)
    async with connect(daemon.url, max_size=None) as ws:
        await _hello(ws)
        await ws.send("x" * 20000)
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd.code == CloseCode.MESSAGE_TOO_BIG
    assert (await bystander.call("echo", {"text": "ok"})).error is None


async def test_invalid_utf8_text_frame_closes_1007(daemon_factory, client_factory):
    daemon = await daemon_factory()
    bystander = await client_factory(daemon)
    async with connect(daemon.url) as ws:
        await _hello(ws)
        # A text frame whose payload is not UTF-8: websockets fails it with 1007.
        await ws.send(b'{"op":"ping","request_id":"\xff\xfe"}', text=True)
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd.code == 1007
    assert (await bystander.call("echo", {"text": "ok"})).error is None


async def test_flood_of_small_frames(daemon_factory, client_factory):
    daemon = await daemon_factory()
    bystander = await client_factory(daemon)
    async with connect(daemon.url) as ws:
        await _hello(ws)
        for i in range(2000):
            await ws.send("{}" if i % 2 else "garbage")
        replies = [parse_server_frame(await ws.recv()) for _ in range(2000)]
        assert all(isinstance(r, ErrorFrame) for r in replies)
    assert (await bystander.call("echo", {"text": "ok"})).error is None


async def test_deep_nesting_is_rejected_not_crashing(daemon_factory, client_factory):
    daemon = await daemon_factory()
    bystander = await client_factory(daemon)
    async with connect(daemon.url) as ws:
        await _hello(ws)
        await ws.send("[" * 100000 + "]" * 100000)
        reply = parse_server_frame(await ws.recv())
        assert reply.error.code == ErrorCode.INVALID_REQUEST
    assert (await bystander.call("echo", {"text": "ok"})).error is None
    await asyncio.sleep(0)
