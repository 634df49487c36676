"""``exai jobs``: add (checked, idempotent on --key), list, show, pause, resume,
run-now, history, rm, on the store a daemon would use."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from exai.cli.main import main
from exai.jobs.sqlite import SqliteJobStore


@pytest.fixture
def jobs_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EXAI_AUDIT_ENABLED", "false")
    monkeypatch.setenv("EXAI_JOBS_URL", f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    return tmp_path


def _out(capsys) -> str:
    return capsys.readouterr().out


def test_the_job_commands(jobs_env, capsys):
    args = [
        "jobs",
        "add",
        "echo",
        "30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--args",
        '{"text": "nightly"}',
        "--owner",
        "alice",
        "--name",
        "nightly",
        "--key",
        "k1",
    ]
    assert main(args) == 0
    created = _out(capsys)
    assert created.startswith("created job_")
    job_id = created.split()[1].rstrip(",")
    assert main(args) == 0 and _out(capsys).startswith(f"exists {job_id}")
    assert main(["jobs", "list", "--json"]) == 0
    [listed] = [json.loads(line) for line in _out(capsys).splitlines()]
    assert (listed["owner"], listed["schedule"]["timezone"]) == ("alice", "Europe/Berlin")
    assert main(["jobs", "pause", job_id]) == 0 and main(["jobs", "list"]) == 0
    assert " paused " in _out(capsys)
    assert main(["jobs", "resume", job_id]) == 0 and "next run" in _out(capsys)
    assert main(["jobs", "run-now", job_id]) == 0 and "queued run" in _out(capsys)
    assert main(["jobs", "history", job_id]) == 0 and " pending " in _out(capsys)
    assert main(["jobs", "show", job_id]) == 0
    shown = json.loads(_out(capsys))
    assert shown["name"] == "nightly" and len(shown["runs"]) == 1
    # Times as `list` prints them, ISO 8601 in UTC, not epoch seconds.
    assert shown["next_run_at"].endswith("+00:00") and "T" in shown["next_run_at"]
    assert shown["runs"][0]["scheduled_for"].endswith("+00:00")
    assert main(["jobs", "rm", job_id]) == 0
    assert main(["jobs", "show", job_id]) == 1
    assert "no job" in capsys.readouterr().err
    store = asyncio.run(_count(jobs_env / "jobs.sqlite3"))
    assert store == 0


async def _count(path: Path) -> int:
    store = await SqliteJobStore.open(path)
    try:
        return len(await store.list_jobs("alice"))
    finally:
        await store.aclose()


@pytest.mark.parametrize(("args", "message"), [
    (["no_such_tool", "every 1h"], "unknown tool 'no_such_tool'; the tools are: "),
    (["echo", "every 1h", "--args", '{"nope": 1}'], "--args: invalid arguments for echo"),
    (["echo", "every 1h", "--args", "text=x"], "--args is not valid JSON"),
    (["echo", "61 * * * *"], "bad cron expression"),
    (["echo", "every 1h", "--tz", "Nowhere/Here"], "unknown time zone"),
    (["echo", "every 1h", "--webhook", "http://127.0.0.1:9/x"], "EXAI_JOBS_WEBHOOK_SECRET"),
    (["echo", "every 1h", "--ntfy", "file:///etc/passwd"], "http(s) URL"),
])  # fmt: skip
def test_bad_jobs_are_refused_with_a_reason(jobs_env, capsys, args, message):
    assert main(["jobs", "add", *args]) == 2  # a usage error: the job was described wrongly
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("exai: ") and message in line
