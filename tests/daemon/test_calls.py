"""Calls: concurrency, ordering, cancel, timeout, replay, streaming and progress."""

from __future__ import annotations

import asyncio

from exai.client import CallStats, ExaiClient
from exai.protocol import ErrorCode
from tests.daemon.tools import CountingTool, FailingTool, ProgressTool, UnsendableTool


async def test_calls_on_one_connection_finish_out_of_order(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client = await client_factory(daemon)
    order: list[str] = []

    async def call(label: str, delay: float) -> None:
        res = await client.call("echo", {"text": label, "delay_s": delay})
        order.append(res.outputs[0].text)

    await asyncio.gather(call("slow", 0.6), call("medium", 0.3), call("fast", 0.0))
    assert order == ["fast", "medium", "slow"]


async def test_ack_states_capped_deadline_for_running_calls(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool], max_timeout_s=5.0)
    client = await client_factory(daemon)
    acks: list[float] = []
    original = client._route

    async def spy(frame):  # type: ignore[no-untyped-def]
        if frame.op == "call_tool_ack":
            acks.append(frame.timeout_s)
        await original(frame)

    client._route = spy  # type: ignore[method-assign]
    stats = CallStats()
    res = await client.call("count", {"seconds": 0.2}, timeout_s=999, stats=stats)
    assert res.error is None
    assert acks == [5.0]
    assert stats.ack_s is not None and stats.ack_s < stats.done_s


async def test_call_finishing_in_its_first_step_needs_no_ack(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client = await client_factory(daemon)
    stats = CallStats()
    res = await client.call("echo", {"text": "quick"}, stats=stats)
    assert res.outputs[0].text == "quick"
    assert stats.ack_s is None


async def test_cancel_cancels_the_tool_task(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    client = await client_factory(daemon)
    task = asyncio.create_task(client.call("count", {"seconds": 30}, request_id="c1"))
    await tool.started.wait()
    await client.cancel("c1")
    res = await task
    assert res.error.code == ErrorCode.CANCELLED
    assert tool.cancelled == 1 and tool.completed == 0
    assert daemon.core.in_flight() == 0


async def test_timeout_cancels_and_reports_timeout(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    client = await client_factory(daemon)
    res = await client.call("count", {"seconds": 30}, timeout_s=0.2)
    assert res.error.code == ErrorCode.TIMEOUT
    assert res.error.retryable is True
    assert tool.cancelled == 1 and tool.completed == 0


async def test_replay_returns_stored_result_without_rerunning(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    client = await client_factory(daemon)
    first = await client.call("count", {"label": "a"}, request_id="same")
    second = await client.call("count", {"label": "a"}, request_id="same")
    assert tool.runs == 1
    assert first.outputs == second.outputs
    assert first.metadata.replayed is False and second.metadata.replayed is True


async def test_replay_across_reconnect_and_attach_to_running(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    client = await client_factory(daemon)
    sid = client.session_id
    running = asyncio.create_task(client.call("count", {"seconds": 0.5}, request_id="r1"))
    await tool.started.wait()
    await client.close()
    assert (await asyncio.gather(running, return_exceptions=True))[0] is not None
    again = await client_factory(daemon, session_id=sid)
    # Still running: the retry attaches to the same execution.
    res = await again.call("count", {"seconds": 0.5}, request_id="r1")
    assert res.error is None and tool.runs == 1
    # Finished: answered from the replay cache.
    res2 = await again.call("count", {"seconds": 0.5}, request_id="r1")
    assert res2.metadata.replayed and tool.runs == 1


async def test_replay_window_expires(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool], replay_window_s=0.0)
    client = await client_factory(daemon)
    await client.call("count", {}, request_id="x")
    await client.call("count", {}, request_id="x")
    assert tool.runs == 2


async def test_stream_chunks_arrive_in_order_before_result(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client = await client_factory(daemon)
    chunks: list[tuple[int, str]] = []
    res = await client.call("echo", {"text": "abcdefghij", "stream_chunks": 5}, stream=True,
                            on_chunk=lambda c: chunks.append((c.seq, c.text)))  # fmt: skip
    assert [seq for seq, _ in chunks] == [0, 1, 2, 3, 4]
    assert "".join(t for _, t in chunks) == "abcdefghij"
    assert res.outputs[0].text == "abcdefghij"


async def test_progress_from_tool_and_heartbeat(daemon_factory, client_factory):
    daemon = await daemon_factory([ProgressTool()], progress_interval_s=0.2)
    client = await client_factory(daemon)
    seen: list[str] = []
    res = await client.call("progressive", {"seconds": 0.9},
                            on_progress=lambda p: seen.append(p.message))  # fmt: skip
    assert res.error is None
    assert seen[:3] == ["step 1", "step 2", "step 3"]
    assert any("running" in m for m in seen[3:]), seen


async def test_unknown_tool_and_invalid_arguments(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client = await client_factory(daemon)
    res = await client.call("no_such_tool", {})
    assert res.error.code == ErrorCode.TOOL_NOT_FOUND
    res = await client.call("echo", {"delay_s": "soon", "bogus": 1})
    assert res.error.code == ErrorCode.VALIDATION_ERROR
    fields = {f["field"] for f in res.error.details["fields"]}
    assert fields == {"delay_s", "bogus"}


async def test_tool_errors_become_results(daemon_factory, client_factory):
    daemon = await daemon_factory([FailingTool()])
    client = await client_factory(daemon)
    res = await client.call("fail", {})
    assert res.error.code == ErrorCode.PROVIDER_ERROR and res.error.retryable
    res = await client.call("fail", {"label": "bug"})
    assert res.error.code == ErrorCode.INTERNAL_ERROR and "boom" in res.error.message
    assert (await client.call("echo", {"text": "ok"})).outputs[0].text == "ok"


async def test_list_tools_schemas_come_from_models(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client = await client_factory(daemon)
    tools = {t.name: t for t in await client.list_tools()}
    assert {"version", "status", "listmodels", "echo"} <= set(tools)
    from exai.tools.builtin import EchoInput

    schema = EchoInput.model_json_schema()
    schema.pop("title")
    for prop in schema["properties"].values():  # generated titles are dropped
        prop.pop("title")
    assert tools["echo"].inputSchema == schema


async def test_echo_can_be_disabled(daemon_factory, client_factory):
    daemon = await daemon_factory(enable_echo=False)
    client = await client_factory(daemon)
    assert "echo" not in {t.name for t in await client.list_tools()}
    assert (await client.call("echo", {})).error.code == ErrorCode.TOOL_NOT_FOUND


async def test_ping_pong(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client: ExaiClient = await client_factory(daemon)
    assert await client.ping() >= 0


async def test_a_slow_reader_gets_every_frame_in_order(daemon_factory, monkeypatch):
    """Frames queue behind a reader that stops reading, then all arrive, in order.

    Once the socket's buffers are full the daemon must take websockets' own send
    path, which waits for the reader (backpressure) instead of buffering without bound.
    """
    import json

    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection

    waited = 0
    original_send = ServerConnection.send

    async def counting_send(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal waited
        waited += 1
        return await original_send(self, *args, **kwargs)

    monkeypatch.setattr(ServerConnection, "send", counting_send)
    daemon = await daemon_factory(max_result_tokens=10_000_000)  # no artifact spill here
    text = "".join(f"{i:07d}" for i in range(1_200_000))  # ~8 MB in 500 chunks
    async with connect(daemon.url, max_queue=4, max_size=None) as ws:
        await ws.send(json.dumps({"op": "hello"}))
        await ws.recv()
        await ws.send(json.dumps({"op": "call_tool", "request_id": "big", "name": "echo",
                                  "stream": True,
                                  "arguments": {"text": text, "stream_chunks": 500}}))  # fmt: skip
        await asyncio.sleep(0.5)  # stop reading while the daemon writes
        chunks, result = [], None
        while result is None:
            frame = json.loads(await ws.recv())
            if frame["op"] == "stream_chunk":
                chunks.append((frame["seq"], frame["text"]))
            elif frame["op"] == "call_tool_res":
                result = frame
    assert [seq for seq, _ in chunks] == list(range(len(chunks)))
    assert "".join(t for _, t in chunks) == text == result["outputs"][0]["text"]
    assert waited > 0  # the buffered path was taken


async def test_a_result_the_protocol_cannot_carry_is_an_internal_error(
    daemon_factory, client_factory
):
    daemon = await daemon_factory([UnsendableTool()])
    client = await client_factory(daemon)
    res = await client.call("unsendable", {})
    assert res.error is not None and res.error.code == ErrorCode.INTERNAL_ERROR
    assert "unsendable returned an invalid result" in res.error.message
    # The connection and the daemon go on serving.
    assert (await client.call("echo", {"text": "still here"})).outputs[0].text == "still here"
