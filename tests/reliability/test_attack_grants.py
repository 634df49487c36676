"""Attacks through scheduled jobs: outspending a budget, outliving a credential, and
calling ``schedule`` before the daemon is ready, against real ``exai serve`` processes.

* **Budget escape**: principals whose JWT carries an ``exai_budget`` too small for
  any prompt schedule ``chat`` jobs (the attack run's job called the provider 25
  times in 6 s while direct calls were refused): no job reaches the provider,
  every run ends ``BUDGET_EXCEEDED``.
* **Expired JWTs**: jobs scheduled with JWTs that expire 3 s later, firing every
  0.1 s (48 runs in the 4 s after expiry in the attack run): no run after the
  expiry, every job paused with the reason.
* **Removed tokens**: jobs scheduled with static tokens, then the daemon restarted
  with those tokens rotated out: no run after the restart, every job paused.
* **The first call**: fresh daemons asked ``schedule`` as their first call, over
  WebSocket and over ``/mcp``, the moment a port answers: never ``INTERNAL_ERROR``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from exai.accounting.budgets import Budget
from exai.auth import issue_token
from exai.client import ExaiClient
from exai.jobs.base import ANY_OWNER, Job, Run
from exai.jobs.sqlite import SqliteJobStore
from tests.jobs.test_first_call import TOKEN as FIRST_CALL_TOKEN
from tests.jobs.test_first_call import first_schedule_call, spawn_daemon
from tests.reliability.harness import (
    DaemonProcess,
    free_port,
    provider_env,
    scaled,
    wait_until,
)

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

SECRET = "grant-attack-jwt-secret-0123456789abcdef"
FAST = {"EXAI_JOBS_TICK_S": "0.05", "EXAI_JOBS_MIN_INTERVAL_S": "0.01",
        "EXAI_TOOL_PROFILE": "full", "EXAI_JWT_SECRET": SECRET}  # fmt: skip
TINY = Budget(Decimal("0.000001"), "USD", "day")


async def _runs(daemon: DaemonProcess) -> tuple[list[Job], dict[str, list[Run]]]:
    store = await SqliteJobStore.open(daemon.data_dir / "jobs.sqlite3")
    try:
        jobs = await store.list_jobs(ANY_OWNER)
        return jobs, {j.id: await store.runs(j.id, ANY_OWNER, 10_000) for j in jobs}
    finally:
        await store.aclose()


async def _schedule(client: ExaiClient, tool: str, arguments: dict, **extra) -> str:
    res = await client.call("schedule", {"tool": tool, "arguments": arguments,
                                         "when": "every 0.1", **extra})  # fmt: skip
    assert res.error is None, res.error
    return str(json.loads(res.outputs[0].text)["id"])


async def test_jobs_of_a_spent_budget_never_reach_the_provider(tmp_path: Path, emulator, figures):
    principals, per = scaled(20, minimum=4), 5
    daemon = DaemonProcess(tmp_path, **FAST, **provider_env(emulator)).start()
    direct: Counter[str] = Counter()
    try:
        for n in range(principals):
            token = issue_token(SECRET, f"frugal-{n}", ttl_s=3600, budget=TINY)
            async with ExaiClient(daemon.url, token) as client:
                res = await client.call("chat", {"prompt": "budget-escape direct",
                                                 "model": "kimi-k2.6"})  # fmt: skip
                direct[res.error.code.value if res.error else "ok"] += 1
                for j in range(per):
                    chat = {"prompt": f"budget-escape job {n}.{j}", "model": "kimi-k2.6"}
                    await _schedule(client, "chat", chat, max_retries=0)

        # max_retries=0: a job's first failed run disables it; fires queued meanwhile
        # stay pending and never start.
        async def all_done() -> bool:
            jobs, runs = await _runs(daemon)
            running = [r for rs in runs.values() for r in rs if r.status == "running"]
            return (
                len(jobs) == principals * per and not running and not any(j.enabled for j in jobs)
            )

        await wait_until(all_done, 180, "every job ran and was disabled")
        jobs, runs = await _runs(daemon)
    finally:
        daemon.stop()
    finished = Counter(r.error_code or r.status for rs in runs.values() for r in rs
                       if r.status != "pending")  # fmt: skip
    pending = sum(r.status == "pending" for rs in runs.values() for r in rs)
    reached = [r for r in emulator.requests if "budget-escape" in json.dumps(r["body"])]
    figures.record("job_grants", budget_principals=principals, budget_jobs=len(jobs),
                   budget_direct_calls=dict(direct), budget_runs=dict(finished),
                   budget_runs_never_started=pending,
                   budget_provider_requests=len(reached))  # fmt: skip
    assert direct == Counter({"BUDGET_EXCEEDED": principals})
    assert reached == []
    assert set(finished) == {"BUDGET_EXCEEDED"} and finished["BUDGET_EXCEEDED"] >= len(jobs)


async def test_jobs_of_expired_jwts_stop_at_the_expiry(tmp_path: Path, figures):
    principals = scaled(20, minimum=4)
    daemon = DaemonProcess(tmp_path, **FAST).start()
    expiry: dict[str, float] = {}
    try:
        for n in range(principals):
            token = issue_token(SECRET, f"brief-{n}", ttl_s=3)
            async with ExaiClient(daemon.url, token) as client:
                job_id = await _schedule(client, "echo", {"text": f"tick {n}"})
            expiry[job_id] = json.loads(_payload(token))["exp"]

        async def all_paused() -> bool:
            jobs, _ = await _runs(daemon)
            return len(jobs) == principals and all(j.paused for j in jobs)

        await wait_until(all_paused, 60, "every job paused")
        await asyncio.sleep(1.0)  # twenty more ticks: nothing more may run
        jobs, runs = await _runs(daemon)
    finally:
        daemon.stop()
    before = sum(1 for j in jobs for r in runs[j.id]
                 if r.status == "succeeded" and r.started_at < expiry[j.id])  # fmt: skip
    after = [r for j in jobs for r in runs[j.id]
             if r.status == "succeeded" and r.started_at >= expiry[j.id]]  # fmt: skip
    refused = Counter(r.error_code for rs in runs.values() for r in rs if r.status == "failed")
    paused_in = [max(r.finished_at for r in runs[j.id] if r.status == "failed") - expiry[j.id]
                 for j in jobs]  # fmt: skip
    figures.record("job_grants", expiry_jobs=len(jobs), expiry_runs_before=before,
                   expiry_runs_after=len(after), expiry_refused=dict(refused),
                   expiry_jobs_paused=sum(j.paused for j in jobs),
                   expiry_paused_within_s=round(max(paused_in), 2))  # fmt: skip
    assert after == [] and before > 0
    assert all(j.paused and "expired" in (j.paused_reason or "") for j in jobs)
    assert set(refused) == {"UNAUTHORIZED"}


async def test_jobs_of_removed_tokens_stop_after_the_restart(tmp_path: Path, figures):
    principals = scaled(20, minimum=4)
    old = {f"owner-{n}": f"old-token-{n}-0123456789" for n in range(principals)}
    new = {name: token.replace("old", "new") for name, token in old.items()}
    spec = ",".join(f"{name}={token}" for name, token in old.items())
    daemon = DaemonProcess(tmp_path, **FAST, EXAI_WS_TOKENS=spec).start()
    try:
        for token in old.values():
            async with ExaiClient(daemon.url, token) as client:
                await _schedule(client, "echo", {"text": "tock"})
        await asyncio.sleep(1.0)
        daemon.stop()
        restarted = time.time()
        daemon.env["EXAI_WS_TOKENS"] = ",".join(f"{n}={t}" for n, t in new.items())
        daemon.start()

        async def all_paused() -> bool:
            jobs, _ = await _runs(daemon)
            return all(j.paused for j in jobs)

        await wait_until(all_paused, 60, "every job paused")
        await asyncio.sleep(1.0)
        jobs, runs = await _runs(daemon)
        raw = b"".join(p.read_bytes() for p in daemon.data_dir.glob("jobs.sqlite3*"))
    finally:
        daemon.stop()
    before = sum(1 for rs in runs.values() for r in rs
                 if r.status == "succeeded" and r.started_at < restarted)  # fmt: skip
    after = [r for rs in runs.values() for r in rs
             if r.status == "succeeded" and r.started_at >= restarted]  # fmt: skip
    tokens_stored = sum(token.encode() in raw for token in [*old.values(), *new.values()])
    figures.record("job_grants", removed_jobs=len(jobs), removed_runs_before=before,
                   removed_runs_after=len(after), removed_jobs_paused=sum(j.paused for j in jobs),
                   removed_tokens_found_in_the_store=tokens_stored)  # fmt: skip
    assert after == [] and before > 0
    assert all(j.paused and "no longer configured" in (j.paused_reason or "") for j in jobs)
    assert tokens_stored == 0


async def _first_call_over_http(workdir: Path) -> str:
    """``schedule`` over /mcp as the first request a fresh daemon answers: its outcome."""
    port = free_port()
    process, _, log = spawn_daemon(workdir, EXAI_HTTP_PORT=str(port))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "schedule", "_meta": meta,
                       "arguments": {"tool": "echo", "when": "every 3600"}}}  # fmt: skip
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": "schedule", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {FIRST_CALL_TOKEN}"}  # fmt: skip
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            while True:
                assert process.poll() is None
                try:
                    answer = await http.post(f"http://127.0.0.1:{port}/mcp", json=body,
                                             headers=headers)  # fmt: skip
                except httpx.TransportError:
                    await asyncio.sleep(0.005)
                    continue
                result = answer.json()["result"]
                if not result["isError"]:
                    return "ok"
                return str(result["structuredContent"]["error"]["code"])
    finally:
        process.terminate()
        process.wait(30)
        log.close()


async def test_schedule_as_the_first_call_of_fresh_daemons(tmp_path: Path, figures):
    starts = scaled(20, minimum=4)
    outcomes: Counter[str] = Counter()
    knocks = 0
    for n in range(starts):
        if n % 2:
            outcomes[f"http_{await _first_call_over_http(tmp_path / f'http-{n}')}"] += 1
            continue
        answer, missed = await first_schedule_call(tmp_path / f"ws-{n}")
        knocks += missed
        outcomes[f"ws_{'ok' if answer['error'] is None else answer['error']['code']}"] += 1
    figures.record("job_grants", first_call_starts=starts, first_call_outcomes=dict(outcomes),
                   first_call_refused_connections_before=knocks)  # fmt: skip
    assert set(outcomes) <= {"ws_ok", "http_ok"}, outcomes


def _payload(token: str) -> str:
    import base64

    body = token.split(".")[1]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
