"""The job store contract, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio

import pytest

from exai.errors import ValidationError_
from exai.jobs.base import ANY_OWNER, JobNotFoundError, NewJob
from exai.jobs.policy import plan_fire
from exai.jobs.schedule import parse_schedule


def _new(owner: str = "alice", key: str | None = None, every: float = 60.0, **kw) -> NewJob:
    schedule = parse_schedule("interval", str(every), anchor=1000.0, min_interval_s=0.001)
    return NewJob(owner=owner, name="n", tool="echo", arguments={"text": "hi"},
                  schedule=schedule, idempotency_key=key, **kw)  # fmt: skip


def _plan(job, now):
    return plan_fire(job.schedule, job.next_run_at, now, job.missed, 30.0)


async def test_creation_is_idempotent_on_the_owners_key(jobs_store):
    first, created = await jobs_store.create_job(_new(key="k1"), 1060.0, 1000.0)
    again, created_again = await jobs_store.create_job(_new(key="k1"), 1060.0, 1001.0)
    assert created and not created_again and again.id == first.id
    other, created_other = await jobs_store.create_job(_new(owner="bob", key="k1"), 1060.0, 1000.0)
    assert created_other and other.id != first.id
    assert [j.id for j in await jobs_store.list_jobs("alice")] == [first.id]
    with pytest.raises(ValidationError_) as err:
        await jobs_store.create_job(_new(key="k1", every=120.0), 1120.0, 1002.0)
    assert err.value.details["reason"] == "idempotency_key_reused"


async def test_a_principal_never_reaches_another_principals_job(jobs_store):
    job, _ = await jobs_store.create_job(_new(), 1060.0, 1000.0)
    for call in (jobs_store.get_job(job.id, "bob"), jobs_store.runs(job.id, "bob"),
                 jobs_store.delete_job(job.id, "bob"),
                 jobs_store.add_manual_run(job.id, "bob", 1000.0),
                 jobs_store.set_state(job.id, "bob", paused=True, now=1000.0)):  # fmt: skip
        with pytest.raises(JobNotFoundError):
            await call
    assert (await jobs_store.get_job(job.id, "alice")).paused is False


async def test_a_fire_becomes_one_run_however_often_it_is_seen(jobs_store):
    job, _ = await jobs_store.create_job(_new(), 1060.0, 1000.0)
    assert await jobs_store.fire_due(1059.0, 10, _plan) == 0
    assert await jobs_store.fire_due(1060.5, 10, _plan) == 1
    assert (await jobs_store.get_job(job.id, ANY_OWNER)).next_run_at == 1120.0
    # The same fire seen again (a second daemon with a stale view) inserts nothing.
    from exai.jobs.policy import FirePlan

    assert await jobs_store.fire_due(1200.0, 10, lambda j, now: FirePlan(1060.0, 1240.0)) == 0
    runs = await jobs_store.runs(job.id, "alice")
    assert [r.scheduled_for for r in runs] == [1060.0]


async def _claimed_by_w1(jobs_store):
    """A job allowing one retry, fired at 1061 and its run claimed by w1 until 1071."""
    job, _ = await jobs_store.create_job(_new(max_retries=1), 1060.0, 1000.0)
    await jobs_store.fire_due(1061.0, 10, _plan)
    [claimed] = await jobs_store.claim("w1", 1061.0, 10.0, 5)
    return job, claimed


async def test_a_claimed_run_is_the_first_attempt_and_no_other_worker_gets_it(jobs_store):
    job, claimed = await _claimed_by_w1(jobs_store)
    assert claimed.job.id == job.id and claimed.run.attempt == 1
    assert await jobs_store.claim("w2", 1061.0, 10.0, 5) == []


async def test_a_renewed_lease_keeps_the_run_from_being_reset(jobs_store):
    _, claimed = await _claimed_by_w1(jobs_store)
    assert await jobs_store.refresh_lease(claimed.run.id, "w1", 1080.0)
    assert await jobs_store.reset_abandoned(1075.0) == 0  # past the first lease, not the renewed
    assert await jobs_store.claim("w2", 1075.0, 10.0, 5) == []


async def test_a_run_whose_lease_passed_is_claimed_again_as_the_next_attempt(jobs_store):
    _, claimed = await _claimed_by_w1(jobs_store)
    assert await jobs_store.reset_abandoned(1071.0) == 0  # the lease ends at 1071, not before
    assert await jobs_store.reset_abandoned(1072.0) == 1  # w1 died
    [again] = await jobs_store.claim("w2", 1072.0, 10.0, 5)
    assert again.run.id == claimed.run.id and again.run.attempt == 2


async def test_a_worker_whose_lease_was_taken_over_cannot_finish_the_run(jobs_store):
    _, claimed = await _claimed_by_w1(jobs_store)
    await jobs_store.reset_abandoned(1081.0)
    await jobs_store.claim("w2", 1081.0, 10.0, 5)
    # w1 comes back: its lease is gone, so nothing it writes lands.
    assert not await jobs_store.finish(claimed.run.id, "w1", status="succeeded", now=1082.0)
    assert await jobs_store.finish(claimed.run.id, "w2", status="succeeded", now=1082.0,
                                   output="out", thread_id="t1")  # fmt: skip
    run = await jobs_store.get_run(claimed.run.id)
    assert (run.status, run.output, run.thread_id, run.attempt) == ("succeeded", "out", "t1", 2)


async def test_a_run_that_keeps_losing_its_worker_stops_after_its_attempts(jobs_store):
    await jobs_store.create_job(_new(max_retries=1), 1060.0, 1000.0)
    await jobs_store.fire_due(1061.0, 10, _plan)
    [c] = await jobs_store.claim("w1", 1061.0, 1.0, 5)
    await jobs_store.reset_abandoned(1063.0)
    [c] = await jobs_store.claim("w2", 1063.0, 1.0, 5)
    await jobs_store.reset_abandoned(1065.0)
    run = await jobs_store.get_run(c.run.id)
    assert (run.status, run.error_code, run.attempt) == ("failed", "ABANDONED", 2)


async def test_retry_later_then_fail_and_disable(jobs_store):
    job, _ = await jobs_store.create_job(_new(), 1060.0, 1000.0)
    await jobs_store.fire_due(1061.0, 10, _plan)
    [c] = await jobs_store.claim("w", 1061.0, 10.0, 5)
    await jobs_store.finish(c.run.id, "w", status="pending", now=1062.0, error_code="X",
                            not_before=1100.0)  # fmt: skip
    assert await jobs_store.claim("w", 1099.0, 10.0, 5) == []
    [c] = await jobs_store.claim("w", 1100.0, 10.0, 5)
    await jobs_store.finish(c.run.id, "w", status="failed", now=1101.0, error_code="X",
                            disable_job="gave up")  # fmt: skip
    job = await jobs_store.get_job(job.id, "alice")
    assert (job.enabled, job.disabled_reason, job.next_run_at) == (False, "gave up", None)
    assert await jobs_store.fire_due(5000.0, 10, _plan) == 0


async def test_paused_jobs_neither_fire_nor_run(jobs_store):
    job, _ = await jobs_store.create_job(_new(), 1060.0, 1000.0)
    await jobs_store.add_manual_run(job.id, "alice", 1001.0)
    await jobs_store.set_state(job.id, "alice", paused=True, next_run_at=None, now=1002.0)
    assert await jobs_store.fire_due(2000.0, 10, _plan) == 0
    assert await jobs_store.claim("w", 2000.0, 10.0, 5) == []


async def test_concurrent_claims_take_each_run_once(jobs_store_factory, jobs_backend):
    stores = [await jobs_store_factory() for _ in range(3 if jobs_backend == "postgres" else 1)]
    for i in range(30):
        await stores[0].create_job(_new(key=f"k{i}"), 1060.0, 1000.0)
    await asyncio.gather(*(s.fire_due(1061.0, 100, _plan) for s in stores for _ in range(2)))
    got = await asyncio.gather(*(s.claim(f"w{i}-{k}", 1061.0, 10.0, 10) for i, s in
                                 enumerate(stores) for k in range(3)))  # fmt: skip
    ids = [c.run.id for batch in got for c in batch]
    assert len(ids) == len(set(ids)) == 30


async def test_a_job_whose_schedule_cannot_be_planned_is_disabled_and_the_rest_fire(jobs_store):
    broken, _ = await jobs_store.create_job(_new(), 1060.0, 1000.0)
    healthy, _ = await jobs_store.create_job(_new(owner="bob"), 1060.0, 1000.0)
    planned: list[str] = []

    def plan(job, now):
        planned.append(job.id)
        if job.id == broken.id:  # as a time zone removed from the system's database does
            raise LookupError("No time zone found with key Mars/Olympus_Mons")
        return _plan(job, now)

    assert await jobs_store.fire_due(1060.5, 10, plan) == 1
    assert [r.scheduled_for for r in await jobs_store.runs(healthy.id, "bob")] == [1060.0]
    gone = await jobs_store.get_job(broken.id, "alice")
    assert gone.enabled is False and "Mars/Olympus_Mons" in (gone.disabled_reason or "")
    planned.clear()
    assert await jobs_store.fire_due(1121.0, 10, plan) == 1
    assert planned == [healthy.id]
