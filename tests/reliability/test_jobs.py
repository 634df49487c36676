"""Scheduled jobs under faults: a daemon killed mid-run, and many fires on many daemons.

* A daemon (``exai serve`` in a subprocess) is SIGKILLed while it runs a job; a
  second daemon takes the run up once its lease has passed and runs it again,
  once: the run ends succeeded at attempt 2, with one turn in its thread.
* Three daemons on one Postgres, 1,000 fires: each runs exactly once (the short
  form, 100 fires, is in ``tests/jobs/test_many_daemons.py``).
"""

from __future__ import annotations

import time
import uuid

import pytest

from exai.auth import Principal
from exai.jobs.base import ANY_OWNER
from exai.jobs.postgres import PostgresJobStore
from exai.jobs.service import JobService, JobSpec
from tests.conftest import make_settings, running_daemon
from tests.jobs.helpers import FAST, finished_runs, wait_for
from tests.jobs.test_many_daemons import _fires_once
from tests.reliability.harness import DaemonProcess

pytestmark = [pytest.mark.reliability, pytest.mark.postgres]


async def test_a_run_whose_daemon_is_killed_is_taken_up_once_after_its_lease(
    tmp_path, postgres_server
):
    url = postgres_server.create_database(f"jobs_{uuid.uuid4().hex[:12]}")
    lease = {"EXAI_JOBS_LEASE_S": "1.5", "EXAI_JOBS_TICK_S": "0.05", "EXAI_STORE_URL": url,
             "EXAI_TOOL_PROFILE": "full"}  # fmt: skip
    victim = DaemonProcess(tmp_path / "victim", **lease).start()
    store = await PostgresJobStore.open(url)
    try:
        settings = make_settings(tmp_path, store_url=url)
        service = JobService(store, settings)
        job, _ = await service.create(
            Principal("ops"),
            JobSpec(
                "echo", {"text": "slow work", "delay_s": 3}, "interval", "86400", max_retries=3
            ),
        )
        run = await service.run_now(job.id, ANY_OWNER)

        async def held() -> str | None:
            current = await store.get_run(run.id)
            return current.locked_by if current.status == "running" else None

        first_worker = await wait_for(held, timeout_s=30)
        victim.kill()
        killed_at = time.time()
        async with running_daemon(
            make_settings(tmp_path / "heir", store_url=url, **{**FAST, "jobs_lease_s": 1.5})
        ) as heir:
            [done] = await finished_runs(store, job.id)
            assert heir.jobs.worker != first_worker
            turns = await heir.services.store.messages(done.thread_id, "ops")
            assert [m.content for m in turns if m.role == "assistant"] == ["slow work"]
        assert (done.status, done.attempt, done.output) == ("succeeded", 2, "slow work")
        assert done.started_at >= killed_at  # taken up only after the lease had passed
        runs = await store.runs(job.id, ANY_OWNER, 100)
        assert [r.id for r in runs] == [run.id]
    finally:
        victim.kill()
        await store.aclose()


async def test_three_daemons_run_each_of_1000_fires_once(tmp_path, postgres_server):
    await _fires_once(tmp_path, postgres_server, fires=1000, jobs=50)
