"""Shared helpers for the jobs tests: fast settings and waiting on the store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from exai.jobs.base import ANY_OWNER, JobStore, Run

FAST = {"jobs_tick_s": 0.05, "jobs_min_interval_s": 0.01, "jobs_lease_s": 5.0,
        "tool_profile": "full"}  # fmt: skip


async def wait_for(check: Callable[[], Awaitable[Any]], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; last value {value!r}")
        await asyncio.sleep(0.05)


async def finished_runs(store: JobStore, job_id: str, n: int = 1) -> list[Run]:
    async def check() -> list[Run] | None:
        runs = await store.runs(job_id, ANY_OWNER, 1000)
        done = [r for r in runs if r.status in ("succeeded", "failed")]
        return done if len(done) >= n else None

    result: list[Run] = await wait_for(check)
    return result
