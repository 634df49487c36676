"""Where notifications may go: internal addresses refused by default, at creation
and again on the address a send uses; one lookup per send; no redirects; URL
credentials masked in every view.

The loopback ``receiver`` (tests/jobs/conftest.py) stands in for an internal
service: a notification that reaches it where the rule refuses would be one
that reaches the operator's network.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import subprocess
import time

import httpx
import pytest
import uvicorn

from exai.auth import Principal
from exai.cli.main import main as cli
from exai.errors import ValidationError_
from exai.jobs.base import ANY_OWNER, NewJob, Notification
from exai.jobs.notify import send
from exai.jobs.schedule import parse_schedule
from exai.jobs.service import JobService, JobSpec
from exai.jobs.sqlite import SqliteJobStore
from tests.conftest import make_settings, running_daemon
from tests.jobs.conftest import Receiver
from tests.jobs.helpers import FAST, finished_runs, wait_for

# Every way of writing an internal address that the attack run tried, and more.
INTERNAL = [
    "127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1",
    "[::ffff:127.0.0.1]", "[::1]", "localhost", "169.254.169.254", "[fe80::1]",
    "10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "0.0.0.0", "0", "[::]",
    "[fd00::1]", "224.0.0.1", "[2002:7f00:1::]", "[64:ff9b::7f00:1]", "255.255.255.255",
]  # fmt: skip


class Resolver:
    """A stand-in for DNS (test fixture): answers each name from a script, one
    answer per lookup (the last one repeats), counts the lookups, and fails for
    names it was not given, as the system resolver does."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        script = self.answers[host]
        return script.pop(0) if len(script) > 1 else script[0]


@pytest.fixture
async def store(tmp_path):
    store = await SqliteJobStore.open(tmp_path / "jobs.sqlite3")
    yield store
    await store.aclose()


def _note(url: str, kind: str = "ntfy") -> Notification:
    return Notification("n1", "job_1", None, "erin", kind, url, {"job_name": "x", "status": "ok"},
                        "pending", 0, 0.0, None, 0.0)  # fmt: skip


@pytest.mark.parametrize("host", INTERNAL)
async def test_internal_targets_are_refused_when_a_job_is_made(tmp_path, store, host):
    service = JobService(store, make_settings(tmp_path))
    with pytest.raises(ValidationError_) as refused:
        await service.create(Principal("erin"), JobSpec(
            "echo", {"text": "x"}, "interval", "3600",
            notify={"kind": "ntfy", "url": f"http://{host}:8080/topic"}))  # fmt: skip
    assert refused.value.details == {"reason": "notify_host_not_allowed"}
    assert "internal address" in refused.value.message
    assert await store.list_jobs(ANY_OWNER) == []


async def test_a_public_name_or_an_allowed_internal_host_is_accepted(tmp_path, store):
    public = JobService(store, make_settings(tmp_path), resolve=Resolver({
        "ntfy.example": [["93.184.216.34"]]}))  # fmt: skip
    job, _ = await public.create(
        Principal("erin"),
        JobSpec(
            "echo", {}, "interval", "3600", notify={"kind": "ntfy", "url": "https://ntfy.example/t"}
        ),
    )
    assert job.notify == {"kind": "ntfy", "url": "https://ntfy.example/t"}
    # A name that does not resolve now is accepted and checked at each send.
    await public.create(
        Principal("erin"),
        JobSpec(
            "echo", {}, "interval", "3600", notify={"kind": "ntfy", "url": "https://nx.invalid/t"}
        ),
    )
    named = JobService(store, make_settings(tmp_path, jobs_notify_hosts=["127.0.0.1"]))
    for form in ("127.0.0.1", "2130706433", "[::ffff:127.0.0.1]"):  # one address, three spellings
        await named.create(
            Principal("erin"),
            JobSpec(
                "echo", {}, "interval", "3600", notify={"kind": "ntfy", "url": f"http://{form}/t"}
            ),
        )


async def test_a_stored_internal_target_is_refused_at_send_and_never_retried(tmp_path, receiver):
    """A target stored before the rule (or under other settings) is checked again
    when it is sent: numeric forms of loopback reach nothing."""
    settings = make_settings(tmp_path, jobs_notify_attempts=3, **FAST)
    async with running_daemon(settings) as daemon:
        store = daemon.services.jobs.store
        schedule = parse_schedule("interval", "3600", anchor=time.time(), min_interval_s=1)
        jobs = []
        for form in ("2130706433", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "localhost"):
            job, _ = await store.create_job(NewJob(
                owner="erin", name=f"old {form}", tool="echo", arguments={"text": "x"},
                schedule=schedule, notify={"kind": "ntfy",
                                           "url": f"http://{form}:{receiver.port}/internal"},
            ), None, time.time())  # fmt: skip
            await daemon.services.jobs.run_now(job.id, "erin")
            jobs.append(job)
        for job in jobs:
            await finished_runs(store, job.id)

            async def undeliverable(job_id: str = job.id) -> int:
                return int((await daemon.services.jobs.show(job_id, "erin"))["undeliverable"])

            assert await wait_for(undeliverable) == 1
            [note] = (await daemon.services.jobs.show(job.id, "erin"))["notifications"]
            assert note["attempts"] == 1 and "internal address" in note["last_error"]
    assert receiver.received == []


async def test_a_name_is_looked_up_once_and_the_request_goes_to_that_address(receiver):
    """The connection goes to the address the check saw; the name is kept for the
    Host header (and TLS), and is never looked up a second time."""
    dns = Resolver({"hooks.rebind.test": [["127.0.0.1"], ["10.9.9.9"]]})
    url = f"http://hooks.rebind.test:{receiver.port}/hook?auth=k"
    async with httpx.AsyncClient(timeout=5) as client:
        sent = await send(client, _note(url), None, time.time(), hosts=["hooks.rebind.test"],
                          resolve=dns)  # fmt: skip
    assert sent.error is None, sent.error
    assert dns.lookups == ["hooks.rebind.test"]
    [got] = receiver.received
    assert got.headers["host"] == f"hooks.rebind.test:{receiver.port}" and got.path == "/hook"


async def test_a_rebinding_answer_is_refused_at_send(tmp_path, store, receiver):
    """DNS rebinding: public when the job is made, loopback when it is sent."""
    dns = Resolver({"evil.rebind.test": [["93.184.216.34"], ["127.0.0.1"]]})
    service = JobService(store, make_settings(tmp_path), resolve=dns)
    url = f"http://evil.rebind.test:{receiver.port}/steal"
    job, _ = await service.create(Principal("erin"), JobSpec(
        "echo", {}, "interval", "3600", notify={"kind": "ntfy", "url": url}))  # fmt: skip
    assert job.notify is not None
    async with httpx.AsyncClient(timeout=5) as client:
        sent = await send(client, _note(url), None, time.time(), hosts=[], resolve=dns)
    assert sent.retry is False and "resolves to 127.0.0.1, an internal address" in sent.error
    assert receiver.received == []


async def test_redirects_are_not_followed(receiver):
    receiver.statuses = [302]
    url = f"http://127.0.0.1:{receiver.port}/moved"
    async with httpx.AsyncClient(timeout=5) as client:
        sent = await send(client, _note(url), None, time.time(), hosts=["127.0.0.1"])
    assert sent.error == "HTTP 302 (redirects are not followed)" and sent.retry
    assert [r.path for r in receiver.received] == ["/moved"]


async def test_notification_credentials_are_masked_in_every_view_but_the_send(
    tmp_path, receiver, client_factory, monkeypatch, capsys
):
    url = f"http://hook-user:pw-S3CRET@127.0.0.1:{receiver.port}/t?auth=AUTH-S3CRET&tk=TOK-S3CRET"
    secrets = ("pw-S3CRET", "AUTH-S3CRET", "TOK-S3CRET")
    settings = make_settings(tmp_path, jobs_notify_hosts=["127.0.0.1"], **FAST)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        made = await client.call("schedule", {"tool": "echo", "arguments": {"text": "x"},
                                              "when": "every 3600", "notify_url": url})  # fmt: skip
        assert made.error is None, made.error
        job_id = json.loads(made.outputs[0].text)["id"]
        await client.call("jobs", {"id": job_id, "action": "run_now"})
        await wait_for(lambda: _value(len(receiver.received)))
        views = [made.outputs[0].text, json.dumps(made.metadata.model_dump())]
        for args in ({}, {"id": job_id, "action": "show"}):
            res = await client.call("jobs", args)
            views += [res.outputs[0].text, json.dumps(res.metadata.model_dump())]
    monkeypatch.setenv("EXAI_JOBS_URL", f"sqlite:///{settings.data_dir / 'jobs.sqlite3'}")
    monkeypatch.setenv("EXAI_DATA_DIR", str(settings.data_dir))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    for argv in (["jobs", "show", job_id], ["jobs", "list", "--json"]):
        assert await asyncio.to_thread(cli, argv) == 0
    views.append(capsys.readouterr().out)
    for view in views:
        assert not [s for s in secrets if s in view], view
    assert "hook-user:****@" in views[-1] and "auth=****" in views[-1]
    # The send itself used the real URL: credentials and query as given.
    [got] = receiver.received
    assert (
        got.headers["authorization"] == "Basic " + base64.b64encode(b"hook-user:pw-S3CRET").decode()
    )
    assert got.path == "/t"


async def _value(value):
    return value


async def test_https_checks_the_certificate_against_the_name_while_connecting_to_the_address(
    tmp_path,
):
    """TLS gets the name (SNI and the certificate check) while the connection goes to
    the address the check saw: a certificate for the name passes, one for another
    name does not. A local TLS receiver with a throwaway CA (test fixtures)."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "1", "-subj", "/CN=exai test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
        "-subj", "/CN=hooks.tls.test")  # fmt: skip
    (tmp_path / "ext.cnf").write_text("subjectAltName=DNS:hooks.tls.test\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "1", "-extfile", "ext.cnf")  # fmt: skip
    app = Receiver()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error",
                                           lifespan="off", ssl_certfile=str(tmp_path / "srv.pem"),
                                           ssl_keyfile=str(tmp_path / "srv.key")))  # fmt: skip
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    dns = Resolver({"hooks.tls.test": [["127.0.0.1"]], "other.tls.test": [["127.0.0.1"]]})
    trust = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    try:
        async with httpx.AsyncClient(timeout=5, verify=trust) as client:
            good = await send(client, _note(f"https://hooks.tls.test:{port}/ok"), None,
                              time.time(), hosts=["hooks.tls.test"], resolve=dns)  # fmt: skip
            wrong = await send(client, _note(f"https://other.tls.test:{port}/no"), None,
                               time.time(), hosts=["other.tls.test"], resolve=dns)  # fmt: skip
    finally:
        server.should_exit = True
        await task
    assert good.error is None, good.error
    assert wrong.error is not None and "certificate" in wrong.error.lower()
    assert [r.path for r in app.received] == ["/ok"]
    assert app.received[0].headers["host"] == f"hooks.tls.test:{port}"
