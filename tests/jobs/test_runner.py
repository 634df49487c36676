"""Jobs run by a real daemon: through the dispatcher, into a thread, retried,
disabled and notified; scopes checked at creation and on every run."""

from __future__ import annotations

import json
import time

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


async def test_a_scheduled_echo_runs_through_the_dispatcher_into_a_thread(tmp_path, client_factory):
    settings = make_settings(tmp_path, jwt_secret=SECRET, **FAST)
    async with running_daemon(settings) as daemon:
        client = await client_factory(
            daemon, _token("alice", ["schedule", "jobs", "unschedule", "echo"])
        )
        res = await client.call("schedule", {"tool": "echo", "arguments": {"text": "wake up"},
                                             "when": "every 0.3", "name": "waker"})  # fmt: skip
        assert res.error is None, res.error
        job = json.loads(res.outputs[0].text)
        store = daemon.services.jobs.store
        runs = await finished_runs(store, job["id"], 2)
        assert all(r.status == "succeeded" and r.output == "wake up" for r in runs)
        assert len({r.thread_id for r in runs}) == 1
        thread_id = runs[0].thread_id
        messages = await daemon.services.store.messages(thread_id, "alice")
        assert [m.content for m in messages if m.role == "assistant"][:2] == ["wake up"] * 2
        # The thread is alice's alone, and so is the job.
        listed = await client.call("jobs", {})
        assert [j["id"] for j in json.loads(listed.outputs[0].text)["jobs"]] == [job["id"]]
        bob = await client_factory(daemon, _token("bob", ["jobs", "unschedule"]))
        seen = await bob.call("jobs", {"id": job["id"], "action": "show"})
        assert seen.error is not None and seen.error.details["reason"] == "job_not_found"
        gone = await bob.call("unschedule", {"id": job["id"]})
        assert gone.error is not None
        # A retry of the same schedule call in its session is the same job.
        again = await client.call("schedule", {"tool": "echo", "arguments": {"text": "wake up"},
                                               "when": "every 0.3", "name": "waker",
                                               "idempotency_key": "k"})  # fmt: skip
        again2 = await client.call("schedule", {"tool": "echo", "arguments": {"text": "wake up"},
                                                "when": "every 0.3", "name": "waker",
                                                "idempotency_key": "k"})  # fmt: skip
        assert json.loads(again.outputs[0].text)["id"] == json.loads(again2.outputs[0].text)["id"]
        assert json.loads(again2.outputs[0].text)["created"] is False
        for action, paused in (("pause", True), ("resume", False)):
            res = await client.call("jobs", {"id": job["id"], "action": action})
            assert json.loads(res.outputs[0].text)["paused"] is paused
        shown = await client.call("jobs", {"id": job["id"], "action": "show"})
        assert len(json.loads(shown.outputs[0].text)["runs"]) >= 2
        done = await client.call("unschedule", {"id": job["id"]})
        assert done.error is None


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
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        job, _ = await service.create(Principal("erin"), JobSpec(
            "echo", {"text": "x"}, "interval", "3600",
            notify={"kind": "ntfy", "url": receiver.url("/down")}))  # fmt: skip
        await service.run_now(job.id, "erin")
        await finished_runs(service.store, job.id)
        await wait_for(lambda: _async(len(receiver.received) >= 1))
        daemon.jobs.clock = lambda: time.time() + 60  # past the retry's backoff

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
    allowed when it was made but is not now is kept undelivered, never sent."""
    settings = make_settings(tmp_path, jobs_notify_hosts=["ntfy.example"], **FAST)
    async with running_daemon(settings) as daemon:
        service = daemon.services.jobs
        with pytest.raises(ValidationError_) as refused:
            await service.create(Principal("erin"), JobSpec(
                "echo", {"text": "x"}, "interval", "3600",
                notify={"kind": "ntfy", "url": receiver.url("/internal")}))  # fmt: skip
        assert refused.value.details == {"reason": "notify_host_not_allowed"}
        daemon.settings.jobs_notify_hosts = ["127.0.0.1"]
        job, _ = await service.create(Principal("erin"), JobSpec(
            "echo", {"text": "x"}, "interval", "3600",
            notify={"kind": "ntfy", "url": receiver.url("/internal")}))  # fmt: skip
        daemon.settings.jobs_notify_hosts = ["ntfy.example"]
        await service.run_now(job.id, "erin")
        await finished_runs(service.store, job.id)

        async def undeliverable():
            return (await service.show(job.id, "erin"))["undeliverable"]

        assert await wait_for(undeliverable) == 1
        note = (await service.show(job.id, "erin"))["notifications"][0]
        assert note["attempts"] == 1 and "EXAI_JOBS_NOTIFY_HOSTS" in note["last_error"]
    assert receiver.received == []
