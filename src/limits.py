"""Capacity and rate limits: one mechanism for each job.

:class:`CapacityLimiter` bounds how many things run at once (calls in the daemon,
calls per session, requests per provider). When it is full a caller waits in a
bounded FIFO queue for a bounded time and then gets ``OVER_CAPACITY`` with a
``retry_after_s`` hint. :class:`TokenBucket` bounds how often something may
happen: a principal's calls (``RATE_LIMITED`` with the time until the next
token), an address's failed logins.

Both are plain asyncio objects with no I/O, so they are tested directly.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from exai.errors import OverCapacityError, RateLimitedError

__all__ = ["CapacityLimiter", "TokenBucket"]


class CapacityLimiter:
    """At most ``limit`` holders; at most ``max_waiters`` queued for ``max_wait_s``."""

    def __init__(self, name: str, limit: int, max_waiters: int = 0, max_wait_s: float = 0.0):
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.name = name
        self.limit = limit
        self.max_waiters = max_waiters
        self.max_wait_s = max_wait_s
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.rejected = 0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _retry_after(self) -> float:
        # A rough hint: the queue clears in about the time one slot is held.
        return round(max(1.0, self.max_wait_s), 1)

    def try_acquire(self) -> bool:
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        if len(self._waiters) >= self.max_waiters or self.max_wait_s <= 0:
            self.rejected += 1
            raise OverCapacityError(
                f"{self.name} is at capacity ({self.limit} in flight)",
                retry_after_s=self._retry_after(),
            )
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            async with asyncio.timeout(self.max_wait_s):
                await fut
        except BaseException as exc:
            handed_slot = fut.done() and not fut.cancelled()
            if isinstance(exc, TimeoutError):
                if handed_slot:  # the slot arrived as the wait expired: keep it
                    return
                self.rejected += 1
                raise OverCapacityError(
                    f"{self.name} is at capacity: waited {self.max_wait_s:g}s for a slot",
                    retry_after_s=self._retry_after(),
                ) from None
            if handed_slot:  # cancelled after being handed the slot: pass it on
                self.release()
            raise
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    def release(self) -> None:
        # Hand the slot straight to the oldest live waiter, so nobody can jump the queue.
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.in_use -= 1

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


class TokenBucket:
    """``rate`` tokens per second up to ``burst``.

    ``take`` spends a token or raises ``RATE_LIMITED``. ``wait_s`` and ``spend``
    are for a caller that must look before it knows whether to spend, such as
    failed logins, which count only once they have failed.
    """

    __slots__ = ("burst", "rate", "tokens", "updated")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.updated = time.monotonic()

    def take(self, n: float = 1.0) -> None:
        self._refill()
        if self.tokens >= n:
            self.tokens -= n
            return
        wait = (n - self.tokens) / self.rate if self.rate > 0 else 60.0
        raise RateLimitedError(
            f"rate limit exceeded ({self.rate * 60:g} calls per minute)",
            retry_after_s=round(wait, 3),
        )

    def wait_s(self, n: float = 1.0) -> float:
        """Seconds until ``n`` tokens are there; 0.0 when they are there now."""
        self._refill()
        if self.tokens >= n:
            return 0.0
        return (n - self.tokens) / self.rate if self.rate > 0 else 60.0

    def spend(self, n: float = 1.0) -> None:
        """Spend ``n`` tokens, or all there are."""
        self._refill()
        self.tokens = max(0.0, self.tokens - n)

    @property
    def full(self) -> bool:
        self._refill()
        return self.tokens >= self.burst

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
