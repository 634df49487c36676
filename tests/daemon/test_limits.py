"""Capacity, rate and connection limits, through a real daemon."""

from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from exai.protocol import ErrorCode
from tests.daemon.tools import CountingTool


async def test_global_capacity_queue_then_over_capacity(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool], max_inflight=2, queue_max=1, queue_timeout_s=0.3)
    client = await client_factory(daemon)
    calls = [asyncio.create_task(client.call("count", {"seconds": 1.0})) for _ in range(2)]
    await tool.started.wait()
    await asyncio.sleep(0.05)
    queued = asyncio.create_task(client.call("count", {"seconds": 0}))
    await asyncio.sleep(0.05)
    rejected = await client.call("count", {"seconds": 0})  # queue full: refused at once
    assert rejected.error.code == ErrorCode.OVER_CAPACITY
    assert rejected.error.retry_after_s and rejected.error.retryable
    res = await queued  # waited 0.3 s in the queue, then gave up
    assert res.error.code == ErrorCode.OVER_CAPACITY
    assert [(await c).error for c in calls] == [None, None]
    assert daemon.core.global_limiter.in_use == 0 and daemon.core.global_limiter.waiting == 0


async def test_queued_call_runs_when_a_slot_frees(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool], max_inflight=1, queue_max=4, queue_timeout_s=5)
    client = await client_factory(daemon)
    results = await asyncio.gather(*(client.call("count", {"seconds": 0.1}) for _ in range(4)))
    assert all(r.error is None for r in results)
    assert tool.runs == 4


async def test_per_session_limit(daemon_factory, client_factory):
    tool = CountingTool()
    daemon = await daemon_factory([tool], max_inflight_per_session=1, queue_timeout_s=0.2)
    a = await client_factory(daemon)
    b = await client_factory(daemon)
    slow = asyncio.create_task(a.call("count", {"seconds": 0.8}))
    await tool.started.wait()
    waited = await a.call("count", {"seconds": 0})
    assert waited.error.code == ErrorCode.OVER_CAPACITY
    other = await b.call("count", {"seconds": 0})  # another session is not affected
    assert other.error is None
    assert (await slow).error is None


async def test_rate_limit_per_principal(daemon_factory, client_factory):
    daemon = await daemon_factory(rate_limit_per_min=60, rate_limit_burst=3,
                                  ws_tokens="alice=a,bob=b")  # fmt: skip
    alice = await client_factory(daemon, "a")
    bob = await client_factory(daemon, "b")
    results = [await alice.call("echo", {"text": str(i)}) for i in range(4)]
    assert [r.error is None for r in results] == [True, True, True, False]
    limited = results[3].error
    assert limited.code == ErrorCode.RATE_LIMITED and 0 < limited.retry_after_s <= 1.0
    assert (await bob.call("echo", {})).error is None


async def test_connection_limit_per_address(daemon_factory, client_factory):
    daemon = await daemon_factory(max_connections_per_ip=2)
    await client_factory(daemon)
    await client_factory(daemon)
    with pytest.raises(InvalidStatus) as info:
        async with connect(daemon.url):
            pass
    assert info.value.response.status_code == 503


async def test_total_connection_limit(daemon_factory, client_factory):
    daemon = await daemon_factory(max_connections=1)
    await client_factory(daemon)
    with pytest.raises(InvalidStatus):
        async with connect(daemon.url):
            pass
