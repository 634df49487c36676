"""CapacityLimiter and TokenBucket, directly."""

from __future__ import annotations

import asyncio

import pytest

from exai.errors import OverCapacityError, RateLimitedError
from exai.limits import CapacityLimiter, TokenBucket


async def test_fifo_handoff_and_counts_return_to_zero():
    lim = CapacityLimiter("t", 1, max_waiters=3, max_wait_s=5)
    order: list[int] = []

    async def worker(i: int) -> None:
        async with lim.slot():
            order.append(i)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(worker(i) for i in range(4)))
    assert order == [0, 1, 2, 3]
    assert lim.in_use == 0 and lim.waiting == 0


async def test_full_queue_rejects_immediately():
    lim = CapacityLimiter("t", 1, max_waiters=0, max_wait_s=5)
    await lim.acquire()
    with pytest.raises(OverCapacityError) as info:
        await lim.acquire()
    assert info.value.retry_after_s and info.value.retryable
    lim.release()
    assert lim.in_use == 0


async def test_cancelled_waiter_leaves_no_trace():
    lim = CapacityLimiter("t", 1, max_waiters=2, max_wait_s=5)
    await lim.acquire()
    waiter = asyncio.create_task(lim.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    lim.release()
    assert lim.in_use == 0 and lim.waiting == 0


async def test_wait_times_out():
    lim = CapacityLimiter("t", 1, max_waiters=2, max_wait_s=0.05)
    await lim.acquire()
    with pytest.raises(OverCapacityError, match="waited"):
        await lim.acquire()
    assert lim.waiting == 0


def test_token_bucket_burst_then_refusal():
    bucket = TokenBucket(rate=1.0, burst=2)
    bucket.take()
    bucket.take()
    with pytest.raises(RateLimitedError) as info:
        bucket.take()
    assert 0 < info.value.retry_after_s <= 1.0
