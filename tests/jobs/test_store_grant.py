"""The grant a job is stored under (schema 2), on SQLite and on Postgres, and a
version-1 file opened by this version."""

from __future__ import annotations

import json
import sqlite3

from exai.auth import Credential
from exai.jobs.base import ANY_OWNER, NewJob
from exai.jobs.schedule import parse_schedule
from exai.jobs.schema import SQLITE_MIGRATIONS
from exai.jobs.sqlite import SqliteJobStore

JWT = Credential("jwt", "a" * 24, key="b" * 24, expires_at=2000.5)


def _new(**kw) -> NewJob:
    schedule = parse_schedule("interval", "60", anchor=1000.0, min_interval_s=1)
    return NewJob(owner="alice", name="n", tool="echo", arguments={"text": "hi"},
                  schedule=schedule, **kw)  # fmt: skip


async def test_the_grant_is_kept_and_replaced_whole(jobs_store):
    budget = {"amount": "0.5", "currency": "USD", "period": "day"}
    job, _ = await jobs_store.create_job(
        _new(scopes=["echo"], budget=budget, credential=JWT), 1060.0, 1000.0
    )
    assert (job.scopes, job.budget, job.credential) == (["echo"], budget, JWT)
    token = Credential("token", "c" * 24)
    again = await jobs_store.set_grant(
        job.id, "alice", scopes=None, budget=None, credential=token, now=1001.0
    )
    assert (again.scopes, again.budget, again.credential) == (None, None, token)


async def test_a_refused_run_pauses_its_job_with_the_reason_until_resumed(jobs_store):
    job, _ = await jobs_store.create_job(_new(credential=JWT), 1000.0, 1000.0)
    await jobs_store.add_manual_run(job.id, "alice", 1000.0)
    [claimed] = await jobs_store.claim("w", 1001.0, 30.0, 10)
    held = await jobs_store.finish(claimed.run.id, "w", status="failed", now=1002.0,
                                   error_code="UNAUTHORIZED", error="paused: expired",
                                   pause_job="paused: expired")  # fmt: skip
    paused = await jobs_store.get_job(job.id, ANY_OWNER)
    assert held and paused.paused and paused.enabled
    assert (paused.paused_reason, paused.next_run_at) == ("paused: expired", None)
    assert paused.public()["paused_reason"] == "paused: expired"
    resumed = await jobs_store.set_state(job.id, "alice", paused=False, next_run_at=1060.0,
                                         now=1003.0)  # fmt: skip
    assert (resumed.paused, resumed.paused_reason) == (False, None)


async def test_a_version_1_file_opens_and_its_jobs_have_no_grant(tmp_path):
    path = tmp_path / "jobs.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE jobs_schema_version (version INTEGER PRIMARY KEY,"
               " applied_at REAL NOT NULL)")  # fmt: skip
    for statement in filter(str.strip, SQLITE_MIGRATIONS[0][1].split(";")):
        db.execute(statement)
    db.execute("INSERT INTO jobs_schema_version VALUES (1, 0)")
    db.execute(
        "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
        " ?, ?)",
        ("job_old", "alice", "old", "echo", json.dumps({"text": "x"}), json.dumps(["echo"]),
         "interval", "60", "UTC", 1000.0, None, 3, 30.0, None, "run_once", None, 1, 0, 1060.0,
         1000.0, 1000.0, None, None),
    )  # fmt: skip
    db.commit()
    db.close()
    store = await SqliteJobStore.open(path)
    try:
        job = await store.get_job("job_old", "alice")
    finally:
        await store.aclose()
    assert (job.scopes, job.budget, job.credential, job.paused_reason) == (["echo"], None, None,
                                                                           None)  # fmt: skip
