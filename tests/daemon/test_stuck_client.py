"""A client that stops reading holds up nobody else: not their calls, not their heartbeats."""

from __future__ import annotations

import asyncio
import json

from exai.protocol import ProgressFrame
from tests.reliability.harness import client_frame, open_raw_websocket


async def _stuck_client(port: int) -> asyncio.StreamWriter:
    """Hello, a long call, then pings until the daemon's replies back up unread."""
    _, writer = await open_raw_websocket(port)
    writer.write(client_frame(json.dumps({"op": "hello"})))
    call = {"op": "call_tool", "request_id": "long", "name": "echo",
            "arguments": {"text": "x", "delay_s": 5}}  # fmt: skip
    writer.write(client_frame(json.dumps(call)))
    ping = client_frame(json.dumps({"op": "ping", "request_id": "p" * 128})) * 100
    try:
        while True:  # until the daemon, unable to send its pongs, stops reading
            writer.write(ping)
            await asyncio.wait_for(writer.drain(), 1.0)
    except TimeoutError:
        return writer


async def test_heartbeats_reach_others_while_one_client_stops_reading(
    daemon_factory, client_factory
):
    daemon = await daemon_factory(progress_interval_s=0.2)
    client = await client_factory(daemon)
    beats: list[ProgressFrame] = []
    wanted = 0
    enough = asyncio.Event()

    def on_progress(frame: ProgressFrame) -> None:
        beats.append(frame)
        if wanted and len(beats) >= wanted:
            enough.set()

    call = asyncio.create_task(
        client.call("echo", {"text": "ok", "delay_s": 4}, on_progress=on_progress)
    )
    stuck = await _stuck_client(daemon.port)
    try:
        # Let the stuck client's heartbeat come due and block on its full socket.
        await asyncio.sleep(0.5)
        wanted = len(beats) + 3
        async with asyncio.timeout(3):
            await enough.wait()
        assert (await call).outputs[0].text == "ok"
    finally:
        stuck.transport.abort()
