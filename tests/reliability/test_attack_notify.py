"""Attacks through job notifications: internal addresses, DNS rebinding, redirects,
and credentials in notification URLs.

One ``exai serve`` process with the job tools, a webhook secret and no
``EXAI_JOBS_NOTIFY_HOSTS`` (the default), and a loopback HTTP receiver in the
test process standing in for an internal service (tests/jobs/conftest.py). The
cases:

* **creation**: every spelling of an internal address (numeric forms, IPv6,
  link-local, private, shared, multicast, 6to4, NAT64...) as an ntfy and a webhook
  target of the ``schedule`` tool: each must be ``VALIDATION_ERROR``;
* **stored targets**: the same targets written straight into the daemon's job
  store (as an older daemon, or other settings, could have stored them) and run:
  each notification must be kept undeliverable after one attempt;
* **DNS rebinding**: a name that resolves to a public address when the job is
  made and to an internal one at each send (a stand-in resolver, a test
  fixture): every send refused, exactly one lookup per send;
* **redirects**: a receiver answering 302 is never followed;
* **credentials**: jobs whose URLs carry a password, ``?auth=`` and a token of
  another name, read back through every view (the tools, ``exai jobs show`` and
  ``list --json``, the notification's error): no secret shown.

The receiver must get no request except the control's, which shows it is reachable.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from exai.auth import ANONYMOUS, Principal
from exai.client import ExaiClient
from exai.jobs.base import ANY_OWNER, NewJob, Notification
from exai.jobs.notify import send
from exai.jobs.schedule import parse_schedule
from exai.jobs.service import JobService, JobSpec
from exai.jobs.sqlite import SqliteJobStore
from exai.protocol import ErrorCode
from tests.conftest import make_settings
from tests.jobs.conftest import Receiver
from tests.reliability.harness import DaemonProcess, scaled, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

SECTION = "attack_notify"
HOOK_KEY = "reliability-webhook-key-0123456789"
INTERNAL = [
    "127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1", "017700000001",
    "127.000.000.001", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::1]", "[0:0:0:0:0:0:0:1]",
    "localhost", "169.254.169.254", "2852039166", "[fe80::1]", "10.0.0.1", "172.16.0.1",
    "192.168.1.1", "100.64.0.1", "0.0.0.0", "0", "[::]", "[fd00::1]", "224.0.0.1",
    "[ff02::1]", "[2002:7f00:1::]", "[64:ff9b::7f00:1]", "255.255.255.255", "198.18.0.1",
]  # fmt: skip
SECRETS = ("pw-R3L-S3CRET", "AUTH-R3L-S3CRET", "TOK-R3L-S3CRET")


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    app = Receiver()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error",
                                           lifespan="off"))  # fmt: skip
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    app.port = server.servers[0].sockets[0].getsockname()[1]
    yield app
    server.should_exit = True
    await task


class FlippingResolver:
    """Stand-in for DNS (test fixture): a public answer for the first lookup of each
    name (the job's creation), an internal one for every lookup after it."""

    def __init__(self, internal: list[str]) -> None:
        self.internal = internal
        self.lookups: dict[str, int] = {}

    async def __call__(self, host: str, port: int) -> list[str]:
        n = self.lookups[host] = self.lookups.get(host, 0) + 1
        return ["93.184.216.34"] if n == 1 else [self.internal[n % len(self.internal)]]


@pytest.fixture
def daemon(tmp_path: Path) -> DaemonProcess:
    proc = DaemonProcess(tmp_path / "d", EXAI_TOOL_PROFILE="full", EXAI_JOBS_TICK_S="0.05",
                         EXAI_JOBS_WEBHOOK_SECRET=HOOK_KEY, EXAI_JOBS_NOTIFY_ATTEMPTS="3",
                         EXAI_JOBS_NOTIFY_TIMEOUT_S="3").start()  # fmt: skip
    yield proc
    proc.stop()


async def test_notifications_reach_no_internal_address(daemon, receiver, figures, tmp_path):
    targets = [(form, kind) for form in INTERNAL for kind in ("ntfy", "webhook")]
    outcomes: dict[str, int] = {}
    async with ExaiClient(daemon.url, None) as client:
        await jobs_ready(client)
        for form, kind in targets:
            url = f"http://{form}:{receiver.port}/create"
            res = await client.call("schedule", {"tool": "echo", "arguments": {"text": "x"},
                                                 "when": "every 1h", "notify_kind": kind,
                                                 "notify_url": url})  # fmt: skip
            code = "created" if res.error is None else res.error.code.value
            outcomes[code] = outcomes.get(code, 0) + 1
    assert outcomes == {ErrorCode.VALIDATION_ERROR.value: len(targets)}

    # The same targets as rows of the daemon's store, run: each refused at its send.
    store = await SqliteJobStore.open(daemon.data_dir / "jobs.sqlite3")
    try:
        schedule = parse_schedule("interval", "86400", anchor=time.time(), min_interval_s=1)
        jobs = []
        for form, kind in targets:
            job, _ = await store.create_job(NewJob(
                owner=ANONYMOUS, name=f"old {form}", tool="echo", arguments={"text": "x"},
                schedule=schedule,
                notify={"kind": kind, "url": f"http://{form}:{receiver.port}/stored"},
            ), None, time.time())  # fmt: skip
            await store.add_manual_run(job.id, ANY_OWNER, time.time())
            jobs.append(job)

        async def notes() -> list[Notification]:
            found = []
            for job in jobs:
                found += await store.notifications(job.id, ANY_OWNER)
            return found

        async def all_kept() -> bool:
            found = await notes()
            return len(found) == len(jobs) and all(n.status != "pending" for n in found)

        await wait_until(all_kept, 120, "every stored target's notification settled")
        settled = await notes()
    finally:
        await store.aclose()
    undeliverable = [n for n in settled if n.status == "undeliverable"]
    assert len(undeliverable) == len(targets)
    assert all(n.attempts == 1 and "internal address" in (n.last_error or "") for n in settled)

    # DNS rebinding: public at creation, internal at every send.
    rounds = scaled(200, minimum=20)
    dns = FlippingResolver(["127.0.0.1", "::1", "169.254.169.254", "10.0.0.1", "::ffff:7f00:1"])
    service = JobService(await SqliteJobStore.open(tmp_path / "rebind.sqlite3"),
                         make_settings(tmp_path / "rebind", jobs_max_per_principal=100_000),
                         resolve=dns)  # fmt: skip
    refused_at_send = 0
    async with httpx.AsyncClient(timeout=3) as http:
        for i in range(rounds):
            name = f"rebind-{i}.attacker.test"
            url = f"http://{name}:{receiver.port}/rebind"
            spec = JobSpec("echo", {}, "interval", "3600", notify={"kind": "ntfy", "url": url})
            await service.create(Principal("mallory"), spec)
            sent = await send(http, _note(url), None, time.time(), hosts=[], resolve=dns)
            refused_at_send += sent.error is not None and not sent.retry
        await service.store.aclose()
        lookups_per_send = {count - 1 for count in dns.lookups.values()}

        # Redirects: the receiver answers 302; it is asked once, never followed.
        tries = scaled(20, minimum=5)
        receiver.statuses = [302] * tries
        before = len(receiver.received)
        moved = _note(f"http://127.0.0.1:{receiver.port}/moved")
        redirects = [await send(http, moved, None, time.time(), hosts=["127.0.0.1"])
                     for _ in range(tries)]  # fmt: skip
        followed = len(receiver.received) - before - tries
        # The control: named in the allowed hosts, the receiver is reached.
        control = await send(http, _note(f"http://127.0.0.1:{receiver.port}/control"), None,
                             time.time(), hosts=["127.0.0.1"])  # fmt: skip
    assert refused_at_send == rounds and lookups_per_send == {1}
    assert all(r.error == "HTTP 302 (redirects are not followed)" for r in redirects)
    assert followed == 0 and control.error is None
    internal_hits = [r for r in receiver.received if r.path not in ("/moved", "/control")]
    assert internal_hits == []
    assert daemon.log_problems() == []
    figures.record(
        SECTION,
        forms=len(INTERNAL),
        created_tries=len(targets),
        creation_outcomes=outcomes,
        stored_tried=len(jobs),
        stored_refused_at_send=len(undeliverable),
        stored_attempts=sorted({n.attempts for n in settled}),
        rebinding_rounds=rounds,
        rebinding_refused=refused_at_send,
        lookups_per_send=sorted(lookups_per_send),
        redirect_tries=tries,
        redirects_followed=followed,
        internal_requests=len(internal_hits),
        control_delivered=int(control.error is None),
    )


async def test_notification_credentials_are_shown_nowhere(daemon, figures):
    urls = [f"https://hook-user:{SECRETS[0]}@ntfy-{i}.invalid/topic?auth={SECRETS[1]}"
            f"&t={SECRETS[2]}" for i in range(scaled(20, minimum=3))]  # fmt: skip
    views: list[str] = []
    async with ExaiClient(daemon.url, None) as client:
        await jobs_ready(client)
        ids = []
        for url in urls:
            args = {"tool": "echo", "arguments": {"text": "x"}, "when": "every 1h",
                    "notify_url": url}  # fmt: skip
            res = await client.call("schedule", args)
            assert res.error is None, res.error
            ids.append(json.loads(res.outputs[0].text)["id"])
            views += [res.outputs[0].text, res.model_dump_json()]
            await client.call("jobs", {"id": ids[-1], "action": "run_now"})

        async def tried() -> bool:
            shown = await client.call("jobs", {"id": ids[-1], "action": "show"})
            notes = json.loads(shown.outputs[0].text)["notifications"]
            return bool(notes) and notes[0]["attempts"] >= 1

        await wait_until(tried, 60, "a notification attempt")
        for job_id in ids:
            for args in ({"id": job_id, "action": "show"}, {}):
                res = await client.call("jobs", args)
                views += [res.outputs[0].text, res.model_dump_json()]
    env = {**os.environ, "EXAI_DATA_DIR": str(daemon.data_dir), "EXAI_AUDIT_ENABLED": "false"}
    for argv in (["jobs", "list", "--json"], *(["jobs", "show", i] for i in ids)):
        out = subprocess.run([sys.executable, "-m", "exai.cli.main", *argv], env=env,
                             cwd=daemon.workdir, capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        assert out.returncode == 0, out.stderr
        views += [out.stdout, out.stderr]
    leaks = [v for v in views if any(s in v for s in SECRETS)]
    assert leaks == []
    figures.record(SECTION, credential_urls=len(urls), views_scanned=len(views),
                   secrets_shown=len(leaks))  # fmt: skip


async def jobs_ready(client: ExaiClient) -> None:
    """The daemon answers /health before its job runner is attached; wait for it."""

    async def ready() -> bool:
        return (await client.call("jobs", {})).error is None

    await wait_until(ready, 30, "the job tools")


def _note(url: str) -> Notification:
    return Notification("n", "job", None, "mallory", "ntfy", url, {"job_name": "x"}, "pending",
                        0, 0.0, None, 0.0)  # fmt: skip
