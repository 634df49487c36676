"""Before login, a client may send nothing larger than a hello: not a frame, not the
upgrade request; only a successful hello lifts the limit."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from exai.client import ExaiClient
from exai.protocol import CloseCode
from tests.conftest import LOG_BUFFER
from tests.reliability.harness import client_frame, open_raw_websocket


async def _close_code_of(reader: asyncio.StreamReader) -> int:
    """The code of the close frame the daemon sends (unmasked, so 2 bytes of header)."""
    head = await reader.readexactly(4)
    assert head[0] == 0x88, head
    return int.from_bytes(head[2:4], "big")


async def test_a_first_frame_over_the_hello_limit_closes_1009_before_the_rest_arrives(
    daemon_factory,
):
    daemon = await daemon_factory(hello_max_bytes=4096, hello_timeout_s=30)
    reader, writer = await open_raw_websocket(daemon.port)
    try:
        # The header of a 1 MiB frame and its first 8 KiB; the rest never comes.
        writer.write(client_frame("x" * 2**20)[: 14 + 8192])
        async with asyncio.timeout(10):  # well inside the hello timeout
            assert await _close_code_of(reader) == CloseCode.MESSAGE_TOO_BIG
    finally:
        writer.close()


async def test_the_hello_limit_counts_decompressed_bytes(daemon_factory):
    daemon = await daemon_factory(ws_compression=True, hello_max_bytes=4096)
    hello = json.dumps({"op": "hello", "token": "0" * 200_000})  # deflates to a few hundred bytes
    async with connect(daemon.url, compression="deflate") as ws:
        await ws.send(hello)
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
    assert info.value.rcvd is not None and info.value.rcvd.code == CloseCode.MESSAGE_TOO_BIG


async def test_a_hello_within_the_limit_is_answered(daemon_factory):
    daemon = await daemon_factory(ws_token="t" * 8192, hello_max_bytes=16 * 1024)
    async with ExaiClient(daemon.url, "t" * 8192) as client:
        assert client.hello is not None and client.hello.ok


@pytest.mark.parametrize("compression", [False, True])
async def test_after_hello_the_full_frame_limit_applies(daemon_factory, compression):
    daemon = await daemon_factory(
        hello_max_bytes=4096,
        max_frame_bytes=1024 * 1024,
        ws_compression=compression,
        max_result_tokens=10**8,  # the text comes back whole, not as an artifact
    )
    text = "y" * 700_000
    async with ExaiClient(daemon.url, compression=compression, max_frame_bytes=2**21) as client:
        res = await client.call("echo", {"text": text})
    assert res.error is None and res.outputs[0].text == text


# --- the upgrade request ---------------------------------------------------------------


async def test_an_upgrade_request_over_the_hello_limit_is_cut_off(daemon_factory):
    daemon = await daemon_factory(hello_max_bytes=4096, hello_timeout_s=30)
    reader, writer = await asyncio.open_connection("127.0.0.1", daemon.port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        for i in range(64):  # 64 KiB of headers, and never the blank line that ends them
            writer.write(b"X-Filler-%d: %s\r\n" % (i, b"a" * 1000))
        async with asyncio.timeout(5):  # websockets alone would wait its 10 s open_timeout
            try:
                assert await reader.read() == b""
            except ConnectionResetError:
                pass  # closed with our headers unread: the kernel resets it
    finally:
        writer.close()


async def test_an_upgrade_request_within_the_limit_is_served(daemon_factory):
    daemon = await daemon_factory(hello_max_bytes=4096)
    headers = {f"X-Filler-{i}": "a" * 100 for i in range(20)}  # 2.5 KiB of headers
    async with connect(daemon.url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"op": "hello"}))
        assert json.loads(await ws.recv())["ok"] is True


async def test_a_client_that_leaves_mid_request_is_not_an_error_in_the_log(daemon_factory, caplog):
    daemon = await daemon_factory()
    mark = LOG_BUFFER.tell()
    for partial in (b"", b"GET / HTTP/1.1\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nUpgr"):
        _, writer = await asyncio.open_connection("127.0.0.1", daemon.port)
        writer.write(partial)
        await writer.drain()
        writer.close()
    async with ExaiClient(daemon.url) as client:  # the daemon has seen them all by now
        assert (await client.call("echo", {"text": "x"})).error is None
    await asyncio.sleep(0.1)
    levels = [json.loads(line)["level"] for line in LOG_BUFFER.getvalue()[mark:].splitlines()]
    assert "error" not in levels
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
