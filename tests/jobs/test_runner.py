"""Jobs run by a real daemon: through the dispatcher, into a thread, retried,
disabled and notified; scopes checked at creation and on every run."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import jwt
import pytest

from exai.auth import Principal
from exai.errors import ForbiddenError, ValidationError_
from exai.jobs.base import ANY_OWNER, NewJob
from exai.jobs.notify import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from exai.jobs.schedule import parse_schedule
from exai.jobs.service import JobSpec
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.jobs.helpers import FAST, finished_runs, wait_for

SECRET = "jwt-secret-for-jobs-tests-0123456789"
HOOK_KEY = "webhook-key-for-tests"


def _token(sub: str, scopes: list[str]) -> str:
    return jwt.encode({"sub": sub, "exp": time.time() + 600, "scopes": scopes}, SECRET, "HS256")


@dataclass
class Scheduled:
    daemon: Any
    client: Any  # alice's
    job: dict[str, Any]


ECHO_JOB = {"tool": "echo", "arguments": {"text": "wake up"}, "when": "every 0.3",
            "name": "waker"}  # fmt: skip


@pytest.fixture
async def scheduled(tmp_path, client_factory) -> AsyncIterator[Scheduled]:
    """A daemon, and alice's client with a job of hers echoing every 0.3 s."""
    settings = make_settings(tmp_path, jwt_secret=SECRET, **FAST)
    async with running_daemon(settings) as daemon:
        client = await client_factory(
            daemon, _token("alice", ["schedule", "jobs", "unschedule", "echo"])
        )
        res = await client.call("schedule", ECHO_JOB)
        assert res.error is None, res.error
        yield Scheduled(daemon, client, json.loads(res.outputs[0].text))


async def _bob(scheduled: Scheduled, client_factory) -> Any:
    return await client_factory(scheduled.daemon, _token("bob", ["jobs", "unschedule"]))


async def test_a_scheduled_echo_runs_through_the_dispatcher_into_one_thread(scheduled):
    store = scheduled.daemon.services.jobs.store
    runs = await finished_runs(store, scheduled.job["id"], 2)
    assert all(r.status == "succeeded" and r.output == "wake up" for r in runs)
    assert len({r.thread_id for r in runs}) == 1
    messages = await scheduled.daemon.services.store.messages(runs[0].thread_id, "alice")
    assert [m.content for m in messages if m.role == "assistant"][:2] == ["wake up"] * 2


async def test_the_jobs_tool_lists_the_callers_jobs_only(scheduled, client_factory):
    listed = await scheduled.client.call("jobs", {})
    assert [j["id"] for j in json.loads(listed.outputs[0].text)["jobs"]] == [scheduled.job["id"]]
    bob = await _bob(scheduled, client_factory)
    assert json.loads((await bob.call("jobs", {})).outputs[0].text)["jobs"] == []


async def test_another_principal_can_neither_see_nor_unschedule_a_job(scheduled, client_factory):
    bob = await _bob(scheduled, client_factory)
    seen = await bob.call("jobs", {"id": scheduled.job["id"], "action": "show"})
    assert seen.error is not None and seen.error.details["reason"] == "job_not_found"
    gone = await bob.call("unschedule", {"id": scheduled.job["id"]})
    assert gone.error is not None
    still = await scheduled.client.call("jobs", {"id": scheduled.job["id"], "action": "show"})
    assert still.error is None


async def test_a_schedule_call_retried_with_its_key_returns_the_job_it_made(scheduled):
    keyed = {**ECHO_JOB, "idempotency_key": "k"}
    first = json.loads((await scheduled.client.call("schedule", keyed)).outputs[0].text)
    again = json.loads((await scheduled.client.call("schedule", keyed)).outputs[0].text)
    assert again["id"] == first["id"] and first["created"] is True and again["created"] is False


async def test_the_jobs_tool_pauses_and_resumes_a_job(scheduled):
    for action, paused in (("pause", True), ("resume", False)):
        res = await scheduled.client.call("jobs", {"id": scheduled.job["id"], "action": action})
        assert json.loads(res.outputs[0].text)["paused"] is paused


async def test_the_jobs_tool_shows_a_jobs_runs(scheduled):
    await finished_runs(scheduled.daemon.services.jobs.store, scheduled.job["id"], 2)
    shown = await scheduled.client.call("jobs", {"id": scheduled.job["id"], "action": "show"})
    assert len(json.loads(shown.outputs[0].text)["runs"]) >= 2


async def test_unschedule_removes_the_job(scheduled):
    done = await scheduled.client.call("unschedule", {"id": scheduled.job["id"]})
    assert done.error is None
    seen = await scheduled.client.call("jobs", {"id": scheduled.job["id"], "action": "show"})
    assert seen.error is not None and seen.error.details["reason"] == "job_not_found"


async def test_scopes_are_checked_at_creation_and_on_every_run(tmp_path, client_factory):
    settings = make_settings(tmp_path, jwt_secret=SECRET, **FAST)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, _token("carol", ["schedule", "echo"]))
        refused = await client.call("schedule", {"tool": "version", "when": "every 1"})
        assert refused.error is not None and refused.error.code.value == "FORBIDDEN"
        service = daemon.services.jobs
        with pytest.raises(ForbiddenError):
            await service.create(Principal("carol", frozenset({"echo"})),
                                 JobSpec("version", {}, "interval", "1"))  # fmt: skip
        # A job whose recorded scopes no longer cover its tool (as if the tool had
        # been granted by mistake and the record narrowed since) fails on its run,
        # without retries, and is disabled.
        schedule = parse_schedule("interval", "100", anchor=time.time(), min_interval_s=1)
        job, _ = await service.store.create_job(NewJob(
            owner="carol", name="sneaky", tool="version", arguments={}, schedule=schedule,
            scopes=["echo"], max_retries=3), time.time() - 1, time.time())  # fmt: skip
        [run] = await finished_runs(service.store, job.id)
        assert (run.status, run.error_code, run.attempt) == ("failed", "FORBIDDEN", 1)
        assert (await service.store.get_job(job.id, ANY_OWNER)).enabled is False


async def test_a_failing_tool_backs_off_then_disables_and_notifies(
    tmp_path, provider_emulator, receiver
):
    provider_emulator.reset()
    # The receiver is on loopback, which notifications reach only when named.
    settings = make_settings(tmp_path, jobs_webhook_secret=HOOK_KEY, jobs_notify_attempts=2,
                             jobs_notify_hosts=["127.0.0.1"],
                             **FAST, **emulated_providers(provider_emulator))  # fmt: skip
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        who = Principal("dave")
        failing = {"prompt": "[emulate:status=500] jobs-backoff", "model": "glm-4.6"}
        jobs = []
        for kind in ("ntfy", "webhook"):
            job, _ = await service.create(who, JobSpec(
                "chat", failing, "interval", "30", name=f"broken-{kind}", max_retries=2,
                backoff_s=0.2, notify={"kind": kind, "url": receiver.url(f"/{kind}")}))  # fmt: skip
            jobs.append(job)
            await service.run_now(job.id, "dave")
        for job in jobs:
            [run] = await finished_runs(service.store, job.id)
            assert (run.status, run.attempt, run.error_code) == ("failed", 3, "PROVIDER_ERROR")
            stored = await service.store.get_job(job.id, "dave")
            assert not stored.enabled and "failed after 3 attempt(s)" in stored.disabled_reason
        attempts = [
            r for r in provider_emulator.requests if "jobs-backoff" in json.dumps(r["body"])
        ]
        assert len(attempts) == 6  # two jobs, three attempts each, no more

        def _arrived(path: str) -> list:
            return [r for r in receiver.received if r.path == path]

        await wait_for(lambda: _async(len(_arrived("/ntfy")) and len(_arrived("/webhook"))))
        [ntfy] = _arrived("/ntfy")
        assert jobs[0].id in ntfy.body.decode() and "failed" in ntfy.body.decode()
        [hook] = _arrived("/webhook")
        stamp = int(hook.headers[TIMESTAMP_HEADER.lower()])
        assert verify(HOOK_KEY, stamp, hook.body, hook.headers[SIGNATURE_HEADER.lower()])
        assert not verify("another-key", stamp, hook.body, hook.headers[SIGNATURE_HEADER.lower()])
        payload = json.loads(hook.body)
        assert (payload["job_id"], payload["status"]) == (jobs[1].id, "failed")
        shown = await service.show(jobs[1].id, "dave")
        assert shown["notifications"][0]["status"] == "delivered"


async def test_an_undeliverable_notification_is_kept_and_shown(tmp_path, receiver):
    receiver.statuses = [503, 503, 503]
    settings = make_settings(tmp_path, jobs_notify_attempts=2, jobs_notify_hosts=["127.0.0.1"],
                             **FAST)  # fmt: skip
    ahead = 0.0  # how far the job runner's clock runs ahead of the wall clock
    async with running_daemon(settings, clock=lambda: time.time() + ahead) as daemon:
        service = daemon.services.jobs
        job, _ = await service.create(Principal("erin"), JobSpec(
            "echo", {"text": "x"}, "interval", "3600",
            notify={"kind": "ntfy", "url": receiver.url("/down")}))  # fmt: skip
        await service.run_now(job.id, "erin")
        await finished_runs(service.store, job.id)
        await wait_for(lambda: _async(len(receiver.received) >= 1))
        ahead = 60.0  # past the retry's backoff

        async def undeliverable():
            return (await service.show(job.id, "erin"))["undeliverable"]

        assert await wait_for(undeliverable) == 1
        shown = await service.show(job.id, "erin")
        note = shown["notifications"][0]
        assert (note["status"], note["attempts"], note["last_error"]) == ("undeliverable", 2,
                                                                          "HTTP 503")  # fmt: skip
        assert len(receiver.received) == 2


async def _async(value):
    return value


async def test_notifications_reach_only_the_allowed_hosts(tmp_path, receiver):
    """A job may not name a host outside EXAI_JOBS_NOTIFY_HOSTS; one whose host was
    allowed when it was made but is not now (the daemon restarted with another
    list) is kept undelivered, never sent."""
    allowed = make_settings(tmp_path, jobs_notify_hosts=["127.0.0.1"], **FAST)
    async with running_daemon(allowed) as daemon:
        job, _ = await daemon.services.jobs.create(Principal("erin"), JobSpec(
            "echo", {"text": "x"}, "interval", "3600",
            notify={"kind": "ntfy", "url": receiver.url("/internal")}))  # fmt: skip
    settings = make_settings(tmp_path, jobs_notify_hosts=["ntfy.example"], **FAST)
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        with pytest.raises(ValidationError_) as refused:
            await service.create(Principal("erin"), JobSpec(
                "echo", {"text": "x"}, "interval", "3600",
                notify={"kind": "ntfy", "url": receiver.url("/internal")}))  # fmt: skip
        assert refused.value.details == {"reason": "notify_host_not_allowed"}
        await service.run_now(job.id, "erin")
        await finished_runs(service.store, job.id)

        async def undeliverable():
            return (await service.show(job.id, "erin"))["undeliverable"]

        assert await wait_for(undeliverable) == 1
        note = (await service.show(job.id, "erin"))["notifications"][0]
        assert note["attempts"] == 1 and "EXAI_JOBS_NOTIFY_HOSTS" in note["last_error"]
    assert receiver.received == []


async def _three_runs_due_together(service, text):  # type: ignore[no-untyped-def]
    """An ``echo`` job of erin's with no retries, and three of its runs asked for at once."""
    job, _ = await service.create(Principal("erin"), JobSpec(
        "echo", {"text": text}, "interval", "3600", max_retries=0))  # fmt: skip
    for _ in range(3):
        await service.run_now(job.id, "erin")
    return job


async def test_a_run_the_owners_rate_limit_puts_off_waits_without_spending_an_attempt(tmp_path):
    # One call a second, none in reserve: of three runs due together, two are
    # refused RATE_LIMITED by the daemon before the tool runs. With no retries
    # allowed, counting those refusals as failures would disable the job.
    settings = make_settings(tmp_path, rate_limit_per_min=60, rate_limit_burst=1, **FAST)
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        job = await _three_runs_due_together(service, "later is fine")
        runs = await finished_runs(service.store, job.id, 3)
        assert [(r.status, r.attempt, r.output) for r in runs] == [
            ("succeeded", 1, "later is fine")] * 3  # fmt: skip
        assert (await service.store.get_job(job.id, "erin")).enabled


async def test_a_vendors_429_is_a_failed_attempt_not_a_deferral(tmp_path, provider_emulator):
    provider_emulator.reset()
    settings = make_settings(tmp_path, **FAST, **emulated_providers(provider_emulator))
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        job, _ = await service.create(Principal("erin"), JobSpec(
            "chat", {"prompt": "[emulate:status=429] busy vendor", "model": "glm-4.6"},
            "interval", "3600", max_retries=0))  # fmt: skip
        await service.run_now(job.id, "erin")
        [run] = await finished_runs(service.store, job.id)
        assert (run.status, run.attempt, run.error_code) == ("failed", 1, "RATE_LIMITED")
        assert not (await service.store.get_job(job.id, "erin")).enabled


async def test_a_run_put_off_past_the_misfire_grace_spends_its_attempts_again(tmp_path):
    # With no grace, the same refusals count: a load that never lets a run
    # through ends in a disabled job, not in runs that wait forever.
    settings = make_settings(tmp_path, rate_limit_per_min=60, rate_limit_burst=1,
                             **{**FAST, "jobs_misfire_grace_s": 0.0})  # fmt: skip
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        job = await _three_runs_due_together(service, "now or never")

        async def disabled() -> bool:
            return not (await service.store.get_job(job.id, "erin")).enabled

        await wait_for(disabled)
        failed = [r for r in await service.store.runs(job.id, "erin") if r.status == "failed"]
        assert failed and {(r.error_code, r.attempt) for r in failed} == {("RATE_LIMITED", 1)}
