"""The collector against a real in-process daemon: counts, latencies, retries, restarts."""

from __future__ import annotations

import asyncio

import pytest

from exai.baseline.client import BaselineClient
from exai.baseline.records import CLIENT_TIMEOUT
from exai.baseline.runner import UnknownToolsError, run_workloads
from tests.baseline.helpers import RecordingProgress, fast_client, free_port, workloads
from tests.conftest import make_settings, running_daemon
from tests.daemon.tools import CountingTool, FailingTool

DELAY_S = 0.2


async def test_known_latency_gives_exact_counts_and_bounded_percentiles(daemon_factory):
    daemon = await daemon_factory()
    plan = workloads({"tool": "echo", "arguments": {"text": "x", "delay_s": DELAY_S},
                      "iterations": 12, "concurrency": 4})  # fmt: skip
    progress = RecordingProgress()
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        result = await run_workloads(client, plan, progress=progress)

    assert progress.total == 12 and len(progress.records) == 12
    assert sorted(r.seq for r in result.records) == list(range(12))
    assert len({r.request_id for r in result.records}) == 12
    s = result.summary["echo"]
    assert (s.calls, s.ok, s.errors, s.success_rate) == (12, 12, 0, 1.0)
    delay_ms = DELAY_S * 1000
    # Nobody answers before the tool's sleep ends, and four workers on one connection must
    # not wait for each other: a serialized call would take a multiple of the delay.
    assert delay_ms <= s.p50_ms <= s.p95_ms <= s.p99_ms <= s.max_ms < 2 * delay_ms
    assert s.server_p50_ms is not None and s.server_p50_ms >= delay_ms
    for r in result.records:
        assert r.ack_ms is not None and 0 <= r.ack_ms < r.latency_ms
        assert r.output_bytes == 1 and (r.retries, r.resends) == (0, 0)
    # At most `concurrency` calls per delay, and clearly more than one at a time.
    assert 1 / DELAY_S < s.throughput_per_s <= 4 / DELAY_S * 1.05


async def test_duration_and_ramp_up_bound_when_calls_start(daemon_factory):
    daemon = await daemon_factory()
    plan = workloads(
        {"tool": "echo", "name": "timed", "arguments": {"delay_s": 0.05}, "duration_s": 0.4,
         "concurrency": 2},
        {"tool": "echo", "name": "ramped", "arguments": {"delay_s": 0.4}, "iterations": 4,
         "concurrency": 4, "ramp_up_s": 0.3},
    )  # fmt: skip
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        result = await run_workloads(client, plan)

    timed = [r for r in result.records if r.workload == "timed"]
    assert 2 <= len(timed) <= 2 * (0.4 / 0.05 + 1)
    assert max(r.start_s for r in timed) < 0.4
    ramped = sorted(r.start_s for r in result.records if r.workload == "ramped")
    # Worker n starts 0.075 s * n after the first, never before; a late worker may
    # close the gap to the next one, so only the spread of the four is a bound.
    assert ramped[-1] - ramped[0] >= 3 * 0.075 * 0.9, ramped


async def test_streaming_records_time_to_first_chunk(daemon_factory):
    daemon = await daemon_factory()
    plan = workloads({"tool": "echo", "arguments": {"text": "abcdefgh", "stream_chunks": 4},
                      "stream": True, "iterations": 3})  # fmt: skip
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        result = await run_workloads(client, plan)
    for r in result.records:
        assert r.ok and r.first_chunk_ms is not None and r.first_chunk_ms <= r.latency_ms
    assert result.summary["echo"].first_chunk_p50_ms is not None


async def test_unknown_tool_stops_the_run_before_any_call(daemon_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool])
    plan = workloads({"tool": "count", "iterations": 5}, {"tool": "no_such_tool", "iterations": 5})
    progress = RecordingProgress()
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        with pytest.raises(UnknownToolsError) as info:
            await run_workloads(client, plan, progress=progress)
    assert info.value.missing == ["no_such_tool"] and "count" in info.value.available
    assert "no_such_tool" in str(info.value) and "optional = true" in str(info.value)
    assert tool.runs == 0 and progress.records == []


async def test_optional_tool_the_daemon_lacks_is_skipped(daemon_factory):
    daemon = await daemon_factory()
    plan = workloads({"tool": "echo", "iterations": 2},
                     {"tool": "not_installed_here", "iterations": 2, "optional": True})  # fmt: skip
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        result = await run_workloads(client, plan)
    assert [s["workload"] for s in result.skipped] == ["not_installed_here"]
    assert {r.workload for r in result.records} == {"echo"}


async def test_retryable_errors_are_retried_and_counted(daemon_factory):
    daemon = await daemon_factory([FailingTool()])
    plan = workloads({"tool": "fail", "iterations": 2, "retries": 2},
                     {"tool": "fail", "name": "bug", "arguments": {"label": "bug"},
                      "iterations": 1})  # fmt: skip
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        result = await run_workloads(client, plan)
    fail, bug = result.summary["fail"], result.summary["bug"]
    assert (fail.calls, fail.ok, fail.retries) == (2, 0, 4)  # retryable: tried 3 times each
    assert fail.errors_by_code == {"PROVIDER_ERROR": 2}
    assert (bug.retries, bug.errors_by_code) == (0, {"INTERNAL_ERROR": 1})  # not retryable


async def test_no_answer_in_time_is_a_client_timeout(daemon_factory):
    daemon = await daemon_factory()
    async with BaselineClient(daemon.url, config=fast_client(wait_margin_s=0)) as client:
        # The daemon's deadline is far away; the client stops waiting first.
        client.exai.call = _never_answers  # type: ignore[method-assign]
        record = await client.measure("echo", {}, timeout_s=0.2)
    assert (record.status, record.error_code) == ("error", CLIENT_TIMEOUT)
    assert record.latency_ms >= 200


async def _never_answers(*args: object, **kwargs: object) -> None:
    await asyncio.sleep(3600)


@pytest.mark.parametrize("how", ["graceful", "crash"])
async def test_daemon_restart_during_a_run_is_survived_with_retries_counted(tmp_path, how):
    settings = make_settings(tmp_path, ws_port=free_port())
    plan = workloads(
        {
            "tool": "echo",
            "arguments": {"text": "x", "delay_s": 0.3},
            "iterations": 12,
            "concurrency": 3,
            "ramp_up_s": 0.3,
            "retries": 3,
        }
    )
    halfway = asyncio.Event()
    progress = RecordingProgress(lambda _: len(progress.records) >= 4 and halfway.set())
    async with running_daemon(settings) as first:
        client = BaselineClient(first.url, config=fast_client())
        await client.connect()
        run = asyncio.create_task(run_workloads(client, plan, progress=progress))
        await asyncio.wait_for(halfway.wait(), 10)
        if how == "crash":
            # Connections vanish with calls in flight: no answer ever comes for them.
            for ws in list(first.ws.connections):
                ws.transport.abort()
        # Graceful, without grace: calls in flight end CANCELLED (retryable), then 1001.
        await first.stop(grace_s=0)
    async with running_daemon(settings) as second:
        result = await asyncio.wait_for(run, 30)
        await client.close()
        assert second.port == settings.ws_port

    s = result.summary["echo"]
    assert (s.calls, s.ok) == (12, 12), s.errors_by_code
    if how == "crash":
        assert s.resends >= 1  # the same request_id sent again after the reconnect
    else:
        assert s.retries >= 1  # a new call after the retryable CANCELLED
    assert result.run["reconnects"] >= 1 and result.run["aborted"] is None


async def test_a_daemon_gone_for_good_aborts_the_run_instead_of_hanging(tmp_path):
    settings = make_settings(tmp_path, ws_port=free_port())
    plan = workloads({"tool": "echo", "arguments": {"delay_s": 0.2}, "iterations": 50,
                      "concurrency": 2})  # fmt: skip
    config = fast_client(max_reconnect_attempts=2, backoff_base_s=0.05)
    started = asyncio.Event()
    progress = RecordingProgress(lambda _: started.set())
    async with running_daemon(settings) as daemon:
        client = BaselineClient(daemon.url, config=config)
        await client.connect()
        run = asyncio.create_task(run_workloads(client, plan, progress=progress))
        await asyncio.wait_for(started.wait(), 10)
        for ws in list(daemon.ws.connections):
            ws.transport.abort()
        await daemon.stop(grace_s=0)
    result = await asyncio.wait_for(run, 10)
    await client.close()

    assert result.run["aborted"] and "gave up reconnecting" in result.run["aborted"]
    assert result.summary["echo"].errors_by_code.get("CONNECTION_ERROR", 0) >= 1
    assert len(result.records) < 50


async def test_parallel_workloads_run_at_the_same_time(daemon_factory):
    daemon = await daemon_factory()
    plan = workloads(
        {"tool": "echo", "name": "a", "arguments": {"delay_s": DELAY_S}, "iterations": 2},
        {"tool": "echo", "name": "b", "arguments": {"delay_s": DELAY_S}, "iterations": 2},
        parallel=True,
    )
    async with BaselineClient(daemon.url, config=fast_client()) as client:
        result = await run_workloads(client, plan)
    assert {r.workload for r in result.records} == {"a", "b"}
    # Sequentially this takes four delays; side by side, two.
    assert 2 * DELAY_S <= result.run["duration_s"] < 4 * DELAY_S
