"""A cancel that arrives right behind its call still ends it with exactly one result."""

from __future__ import annotations

import asyncio
import json

from exai.protocol import ErrorCode, parse_server_frame
from tests.reliability.harness import client_frame, open_raw_websocket


async def test_cancel_read_before_the_call_has_started_is_answered(daemon_factory):
    daemon = await daemon_factory()
    reader, writer = await open_raw_websocket(daemon.port)
    try:
        writer.write(client_frame(json.dumps({"op": "hello"})))
        # One write: the daemon reads the cancel before the call's task takes a step.
        call = {
            "op": "call_tool",
            "request_id": "c1",
            "name": "echo",
            "arguments": {"text": "x", "delay_s": 5},
        }
        writer.write(
            client_frame(json.dumps(call))
            + client_frame(json.dumps({"op": "cancel", "request_id": "c1"}))
        )
        frames = []
        async with asyncio.timeout(3):
            while not frames or frames[-1].op != "call_tool_res":
                head = await reader.readexactly(2)
                size = head[1] & 0x7F
                if size == 126:
                    size = int.from_bytes(await reader.readexactly(2), "big")
                frames.append(parse_server_frame(await reader.readexactly(size)))
        assert frames[-1].request_id == "c1"
        assert frames[-1].error is not None and frames[-1].error.code == ErrorCode.CANCELLED
        assert daemon.core.in_flight() == 0
        assert not any(s.calls for s in daemon.core.sessions)
    finally:
        writer.transport.abort()
