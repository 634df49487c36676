"""A job is held to the grant of the credential that made it: the token's budget on
every run, and no run once that credential has expired or its token is gone.

Real daemons, real tokens and JWTs, the provider emulator; the job store read
back to see what ran and what was recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from exai.accounting.budgets import Budget
from exai.auth import issue_token
from exai.jobs.base import ANY_OWNER
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.jobs.helpers import FAST, finished_runs, wait_for

SECRET = "jwt-secret-for-the-grant-tests-0123456789"
TINY = Budget(Decimal("0.000001"), "USD", "day")  # less than any prompt costs


async def test_a_scheduled_chat_is_held_to_its_tokens_spent_budget(
    tmp_path: Path, provider_emulator, client_factory
):
    provider_emulator.reset()
    settings = make_settings(tmp_path, jwt_secret=SECRET, **FAST,
                             **emulated_providers(provider_emulator))  # fmt: skip
    token = issue_token(SECRET, "frugal", ttl_s=600, budget=TINY)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, token)
        direct = await client.call("chat", {"prompt": "budget-escape direct", "model": "kimi-k2.6"})
        assert direct.error is not None and direct.error.code.value == "BUDGET_EXCEEDED"
        made = await client.call("schedule", {
            "tool": "chat", "arguments": {"prompt": "budget-escape job", "model": "kimi-k2.6"},
            "when": "every 0.2", "max_retries": 0})  # fmt: skip
        assert made.error is None, made.error
        job_id = json.loads(made.outputs[0].text)["id"]
        store = daemon.services.jobs.store
        [run] = await finished_runs(store, job_id)
    sent = [r for r in provider_emulator.requests if "budget-escape" in json.dumps(r["body"])]
    assert sent == []  # neither the direct call nor the job reached the provider
    assert (run.status, run.error_code) == ("failed", "BUDGET_EXCEEDED")


async def test_a_job_made_with_a_jwt_is_paused_when_the_jwt_expires(tmp_path: Path, client_factory):
    settings = make_settings(tmp_path, jwt_secret=SECRET, **FAST)
    token = issue_token(SECRET, "brief", ttl_s=3)
    expires_at = float(json.loads(_claims(token))["exp"])
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, token)
        made = await client.call("schedule", {"tool": "echo", "arguments": {"text": "tick"},
                                              "when": "every 0.2"})  # fmt: skip
        assert made.error is None, made.error
        job_id = json.loads(made.outputs[0].text)["id"]
        store = daemon.services.jobs.store

        async def paused():
            job = await store.get_job(job_id, ANY_OWNER)
            return job if job.paused else None

        job = await wait_for(paused, timeout_s=20)
        await _settle(daemon)
        runs = await store.runs(job_id, ANY_OWNER, 1000)
        later = await client_factory(daemon, issue_token(SECRET, "brief", ttl_s=600))
        shown = await later.call("jobs", {"id": job_id, "action": "show"})
    ran = [r for r in runs if r.status == "succeeded"]
    refused = [r for r in runs if r.status == "failed"]
    assert ran and all(r.started_at < expires_at for r in ran)
    assert [r.error_code for r in refused] == ["UNAUTHORIZED"]
    # Claimed (started) maybe a moment before ``exp``, refused by a check made after it.
    assert refused[0].finished_at is not None and refused[0].finished_at >= expires_at
    assert not [r for r in runs if r.status in ("pending", "running")]
    assert "expired" in job.paused_reason and job.next_run_at is None
    public = json.loads(shown.outputs[0].text)
    assert public["paused"] is True and public["paused_reason"] == job.paused_reason
    assert public["credential"]["kind"] == "jwt"
    assert public["credential"]["expires_at"] == expires_at
    assert token not in shown.outputs[0].text


async def test_a_job_made_with_a_static_token_is_paused_once_the_token_is_removed(
    tmp_path: Path, client_factory
):
    first = make_settings(tmp_path, ws_tokens="alice=tok-alice-old-0123456789", **FAST)
    async with running_daemon(first) as daemon:
        client = await client_factory(daemon, "tok-alice-old-0123456789")
        made = await client.call("schedule", {"tool": "echo", "arguments": {"text": "tock"},
                                              "when": "every 0.2"})  # fmt: skip
        job_id = json.loads(made.outputs[0].text)["id"]
        await finished_runs(daemon.services.jobs.store, job_id)
    # The operator rotates alice's token: the old one is no longer configured.
    second = make_settings(tmp_path, ws_tokens="alice=tok-alice-new-0123456789", **FAST)
    async with running_daemon(second) as daemon:
        store = daemon.services.jobs.store

        async def paused():
            job = await store.get_job(job_id, ANY_OWNER)
            return job if job.paused else None

        job = await wait_for(paused, timeout_s=20)
        await _settle(daemon)
        refused = [r for r in await store.runs(job_id, ANY_OWNER, 1000) if r.status == "failed"]
        # Resumed with a token the daemon accepts now, the job runs again, under it.
        client = await client_factory(daemon, "tok-alice-new-0123456789")
        resumed_at = time.time()
        resumed = await client.call("jobs", {"id": job_id, "action": "resume"})
        assert resumed.error is None and json.loads(resumed.outputs[0].text)["paused"] is False

        async def ran_again():
            runs = await store.runs(job_id, ANY_OWNER, 1000)
            return [r for r in runs if r.status == "succeeded" and r.started_at >= resumed_at]

        await wait_for(ran_again, timeout_s=20)
    assert "no longer configured" in job.paused_reason
    assert [r.error_code for r in refused] == ["UNAUTHORIZED"]
    # `exai jobs show` says why, and names the token only by an identifier.
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXAI_")}
    shell = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exai.cli.main", "jobs", "show", job_id, cwd=tmp_path,
        env={**env, "EXAI_DATA_DIR": str(second.data_dir), "EXAI_AUDIT_ENABLED": "false"},
        stdout=asyncio.subprocess.PIPE)  # fmt: skip
    out, _ = await shell.communicate()
    assert shell.returncode == 0
    shown = json.loads(out)
    assert shown["credential"]["kind"] == "token"
    assert [r["error"] for r in shown["runs"] if r["status"] == "failed"] == [job.paused_reason]
    raw = b"".join(p.read_bytes() for p in second.data_dir.glob("jobs.sqlite3*"))
    assert b"tok-alice-old" not in raw and b"tok-alice-new" not in raw


@pytest.mark.parametrize("scopes", [None, ["echo", "schedule"]])
async def test_the_grant_recorded_is_the_callers(tmp_path: Path, client_factory, scopes):
    settings = make_settings(tmp_path, jwt_secret=SECRET, **FAST)
    budget = Budget(Decimal("2.5"), "USD", "month")
    token = issue_token(SECRET, "erin", scopes=scopes, ttl_s=600, budget=budget)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, token)
        made = await client.call("schedule", {"tool": "echo", "when": "every 3600"})
        job = await daemon.services.jobs.store.get_job(
            json.loads(made.outputs[0].text)["id"], "erin"
        )
    assert job.scopes == (None if scopes is None else sorted(scopes))
    assert job.budget == {"amount": "2.5", "currency": "USD", "period": "month"}
    assert job.credential is not None and job.credential.kind == "jwt"


def _claims(token: str) -> str:
    import base64

    body = token.split(".")[1]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


async def _settle(daemon) -> None:
    """Let a run claimed on the tick that paused the job finish."""
    runner = daemon.jobs
    await wait_for(lambda: _no_runs(runner), timeout_s=10)


async def _no_runs(runner) -> bool:
    return not runner.running
