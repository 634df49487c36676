"""Several daemons on one Postgres: every fire runs exactly once.

Three daemons tick against one database with short interval jobs; a counting
tool (a test fixture) records which daemon ran which run. The short form (100
fires) runs in ``make test``; the long form (1,000 fires) is in
``tests/reliability/test_jobs.py`` (``make reliability``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from contextlib import AsyncExitStack

import pytest

from exai.auth import Principal
from exai.jobs.base import ANY_OWNER
from exai.jobs.service import JobSpec
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from tests.conftest import make_settings, running_daemon
from tests.jobs.helpers import FAST, wait_for


class CountInput(ToolInput):
    pass


class CountingTool(Tool):
    """Test fixture: records (daemon, run id) of each call; a run's session is job-<run id>."""

    name = "count_run"
    description = "test fixture"
    Input = CountInput
    profile = "lean"

    def __init__(self, label: str, seen: list[tuple[str, str]]) -> None:
        self.label, self.seen = label, seen

    async def run(self, arguments: CountInput, context: ToolContext) -> ToolResult:
        self.seen.append((self.label, context.session_id.removeprefix("job-")))
        await asyncio.sleep(0.01)
        return ToolResult(f"counted by {self.label}")


async def _fires_once(tmp_path, postgres_server, fires: int, jobs: int) -> None:
    url = postgres_server.create_database(f"jobs_{uuid.uuid4().hex[:12]}")
    seen: list[tuple[str, str]] = []
    async with AsyncExitStack() as stack:
        daemons = []
        for i in range(3):
            settings = make_settings(tmp_path / f"d{i}", store_url=url, http_port=None,
                                     **{**FAST, "jobs_tick_s": 0.02})  # fmt: skip
            daemons.append(await stack.enter_async_context(
                running_daemon(settings, [CountingTool(f"d{i}", seen)])))  # fmt: skip
        service, store = daemons[0].services.jobs, daemons[0].services.jobs.store
        made = [
            (
                await service.create(
                    Principal("ops"), JobSpec("count_run", {}, "interval", "0.2", name=f"j{n}")
                )
            )[0]
            for n in range(jobs)
        ]

        async def runs_so_far() -> int:
            total = 0
            for job in made:
                total += len(await store.runs(job.id, ANY_OWNER, 100_000))
            return total if total >= fires else 0

        await wait_for(runs_so_far, timeout_s=60 + fires / 10)
        for job in made:  # no more fires; the runs already made still run
            await store.set_state(job.id, ANY_OWNER, next_run_at=None, now=time.time())

        async def settled() -> list:
            runs = [r for job in made for r in await store.runs(job.id, ANY_OWNER, 100_000)]
            return runs if all(r.status in ("succeeded", "failed") for r in runs) else []

        runs = await wait_for(settled, timeout_s=30)
    assert len(runs) >= fires
    assert {r.status for r in runs} == {"succeeded"}
    executed = Counter(run_id for _, run_id in seen)
    assert set(executed) == {r.id for r in runs}
    assert max(executed.values()) == 1, executed.most_common(3)
    assert len({(r.job_id, r.scheduled_for) for r in runs}) == len(runs)
    by_daemon = Counter(label for label, _ in seen)
    assert len(by_daemon) >= 2, by_daemon  # the work was shared, not one daemon's alone


@pytest.mark.postgres
async def test_three_daemons_run_each_of_100_fires_once(tmp_path, postgres_server):
    await _fires_once(tmp_path, postgres_server, fires=100, jobs=20)
