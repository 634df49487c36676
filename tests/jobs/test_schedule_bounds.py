"""One principal's schedule cannot break anyone's view: schedules are bounded to
dates that can be shown, time zones are checked by name, and ``exai jobs list``
shows a row it cannot read as unreadable, with its id, and goes on."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from exai.cli.main import main
from exai.errors import ValidationError_
from exai.jobs.base import NewJob
from exai.jobs.schedule import Schedule, next_fire, parse_schedule, split_when
from exai.jobs.sqlite import SqliteJobStore
from exai.protocol import ErrorCode
from tests.conftest import make_settings, running_daemon

NOW = 1_800_000_000.0


@pytest.mark.parametrize("when", [
    "every 1e15", "every 1e300d", "every 36600d", "every 1e308", "every 4e9s",
    "9999-12-31T23:59:59-12:00", "9999-12-31T23:59:59", "9000-01-01T00:00:00+00:00",
])  # fmt: skip
def test_schedules_that_fire_beyond_a_showable_date_are_refused(when):
    kind, spec = split_when(when)
    with pytest.raises(ValidationError_) as refused:
        parse_schedule(kind, spec, "Pacific/Kiritimati", anchor=NOW, min_interval_s=60)
    assert refused.value.details["reason"] == "bad_schedule"


def test_the_longest_schedules_allowed_still_give_showable_dates():
    for when in ("every 36500d", "8999-12-31T00:00"):
        schedule = parse_schedule(*split_when(when), "Pacific/Kiritimati", anchor=NOW)
        fire = next_fire(schedule, NOW)
        assert fire is not None and time.gmtime(fire).tm_year < 9000


BAD_ZONES = ["A" * 5000, "x" * 65, "../../../etc/passwd", "Europe/Nowhere", "", " UTC",
             "Europe//Berlin", "/etc/localtime", "UTC\x00"]  # fmt: skip


@pytest.mark.parametrize("zone", BAD_ZONES)
def test_time_zones_are_checked_by_name(zone):
    with pytest.raises(ValidationError_) as refused:
        parse_schedule("cron", "0 9 * * *", zone)
    assert "unknown time zone" in refused.value.message
    assert len(refused.value.message) < 300


async def test_the_schedule_tool_answers_bad_schedules_with_validation_errors(
    tmp_path, client_factory
):
    async with running_daemon(make_settings(tmp_path, tool_profile="full")) as daemon:
        client = await client_factory(daemon)
        cases = [{"when": "every 1e15"}, {"when": "every 1", "timezone": "A" * 5000},
                 {"when": "every 1h", "timezone": "B" * 60},
                 {"when": "9999-12-31T23:59:59-12:00"}]  # fmt: skip
        for case in cases:
            res = await client.call("schedule", {"tool": "echo", "arguments": {}, **case})
            assert res.error is not None and res.error.code == ErrorCode.VALIDATION_ERROR, case
        listed = await client.call("jobs", {})
        assert json.loads(listed.outputs[0].text) == {"jobs": []}


@pytest.fixture
def jobs_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EXAI_AUDIT_ENABLED", "false")
    monkeypatch.setenv("EXAI_JOBS_URL", f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    return tmp_path


async def _store_rows(path: Path) -> list[str]:
    """A good job, and rows an older daemon could have stored: an interval of 1e15 s
    (its next fire in the year 31 million), and a time zone that no longer exists."""
    store = await SqliteJobStore.open(path)
    ids = []
    try:
        good = parse_schedule("interval", "3600", anchor=NOW)
        for schedule, next_at in (
            (good, NOW + 3600),
            (Schedule("interval", "1e15", "UTC", NOW), NOW + 1e15),
            (Schedule("cron", "0 9 * * *", "Gone/Zone", NOW), NOW),
        ):
            job, _ = await store.create_job(NewJob(owner="mallory", name="x", tool="echo",
                                                   arguments={}, schedule=schedule),
                                            next_at, NOW)  # fmt: skip
            ids.append(job.id)
    finally:
        await store.aclose()
    return ids


def test_one_bad_row_does_not_break_the_listing(jobs_env, capsys):
    good, huge, zone = asyncio.run(_store_rows(jobs_env / "jobs.sqlite3"))
    assert main(["jobs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(good) and "next 2027-01-15T09:00:00+00:00" in lines[0]
    assert lines[1].startswith(huge) and "unreadable" in lines[1]
    assert lines[2].startswith(zone)
    assert main(["jobs", "list", "--json"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == [
        good, huge, zone]  # fmt: skip
    assert main(["jobs", "add", "echo", "every 1e15"]) == 2
    assert "at most" in capsys.readouterr().err
