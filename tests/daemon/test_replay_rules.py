"""What a call re-sent under a known request_id gets: the same authorization as a new
call, the stored answer only if it is the same call, and a bounded cache."""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect

from exai.auth import issue_token
from exai.protocol import CallToolResult, ErrorCode, parse_server_frame
from tests.daemon.tools import CountingTool

SECRET = "test-jwt-secret-0123456789abcdef0123456789"


async def test_a_narrower_token_resuming_the_session_cannot_replay_what_it_may_not_call(
    daemon_factory, client_factory
):
    tool = CountingTool()
    daemon = await daemon_factory([tool], jwt_secret=SECRET)
    full = await client_factory(daemon, issue_token(SECRET, "dave"))
    done = await full.call("count", {"label": "secret"}, request_id="r1")
    assert done.error is None
    session = full.session_id
    await full.close()
    narrow = await client_factory(daemon, issue_token(SECRET, "dave", scopes=["echo"]),
                                  session_id=session)  # fmt: skip
    assert narrow.session_id == session
    replay = await narrow.call("count", {"label": "secret"}, request_id="r1")
    assert replay.error is not None and replay.error.code == ErrorCode.FORBIDDEN
    assert replay.outputs == [] and not replay.metadata.replayed
    assert tool.runs == 1


async def test_a_narrower_token_cannot_attach_to_a_running_call_it_may_not_make(
    daemon_factory, client_factory
):
    tool = CountingTool()
    daemon = await daemon_factory([tool], jwt_secret=SECRET)
    full = await client_factory(daemon, issue_token(SECRET, "dave"))
    session = full.session_id
    running = asyncio.create_task(full.call("count", {"seconds": 1.0, "label": "x"},
                                            request_id="r1"))  # fmt: skip
    await tool.started.wait()
    narrow = await client_factory(daemon, issue_token(SECRET, "dave", scopes=["echo"]),
                                  session_id=session)  # fmt: skip
    attached = await narrow.call("count", {"seconds": 1.0, "label": "x"}, request_id="r1")
    assert attached.error is not None and attached.error.code == ErrorCode.FORBIDDEN
    assert attached.outputs == []
    await asyncio.gather(running, return_exceptions=True)
    assert tool.runs == 1


async def test_a_finished_request_id_sent_again_for_another_call_is_refused(
    daemon_factory, client_factory
):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    client = await client_factory(daemon)
    first = await client.call("count", {"label": "a"}, request_id="same")
    other = await client.call("count", {"label": "b"}, request_id="same")
    assert other.error is not None and other.error.code == ErrorCode.REQUEST_ID_REUSED
    assert other.outputs == [] and not other.error.retryable
    again = await client.call("count", {"label": "a"}, request_id="same")
    assert again.metadata.replayed and again.outputs == first.outputs
    assert tool.runs == 1


async def test_a_running_request_id_sent_again_for_another_call_is_refused(daemon_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"op": "hello"}))
        assert parse_server_frame(await ws.recv()).ok
        call = {"op": "call_tool", "request_id": "same", "name": "count"}
        await ws.send(json.dumps({**call, "arguments": {"seconds": 0.5, "label": "a"}}))
        await tool.started.wait()
        await ws.send(json.dumps({**call, "arguments": {"seconds": 0.5, "label": "b"}}))
        results = []
        while len(results) < 2:
            frame = parse_server_frame(await ws.recv())
            if isinstance(frame, CallToolResult):
                results.append(frame)
    refused, answered = results
    assert refused.error is not None and refused.error.code == ErrorCode.REQUEST_ID_REUSED
    # The running call is left alone and still gets its own answer.
    assert answered.error is None and answered.outputs[0].text == "a:1"
    assert tool.runs == 1
