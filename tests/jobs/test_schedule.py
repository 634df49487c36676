"""The pure decisions: next fire times (DST included), missed fires, retries."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from exai.errors import ValidationError_
from exai.jobs.policy import (
    FirePlan,
    GiveUp,
    Retry,
    after_failure,
    backoff_s,
    plan_fire,
)
from exai.jobs.schedule import next_fire, parse_schedule, split_when

BERLIN = ZoneInfo("Europe/Berlin")


def _t(*args: int, tz: ZoneInfo = BERLIN, fold: int = 0) -> float:
    return datetime(*args, tzinfo=tz, fold=fold).timestamp()  # type: ignore[misc]


def _fires(schedule, start: float, n: int) -> list[datetime]:
    out, at = [], start
    for _ in range(n):
        at = next_fire(schedule, at)
        out.append(datetime.fromtimestamp(at, BERLIN))
    return out


def test_0230_across_spring_forward_runs_once_right_after_the_gap():
    # 2026-03-29 in Berlin: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    s = parse_schedule("cron", "30 2 * * *", "Europe/Berlin")
    fires = _fires(s, _t(2026, 3, 27, 12, 0), 4)
    assert [(f.day, f.hour, f.minute) for f in fires] == [(28, 2, 30), (29, 3, 0), (30, 2, 30),
                                                           (31, 2, 30)]  # fmt: skip
    assert [f.utcoffset().total_seconds() / 3600 for f in fires] == [1, 2, 2, 2]


def test_0230_across_fall_back_runs_once_at_the_first_of_the_two():
    # 2026-10-25 in Berlin: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    s = parse_schedule("cron", "30 2 * * *", "Europe/Berlin")
    fires = _fires(s, _t(2026, 10, 23, 12, 0), 4)
    assert [(f.day, f.hour, f.minute) for f in fires] == [(24, 2, 30), (25, 2, 30), (26, 2, 30),
                                                           (27, 2, 30)]  # fmt: skip
    assert fires[1].utcoffset().total_seconds() == 7200  # the first 02:30, still summer time
    gaps = {fires[i + 1].timestamp() - fires[i].timestamp() for i in range(3)}
    assert 86400 + 3600 in gaps  # the day with 25 hours


def test_hourly_cron_runs_in_both_copies_of_the_repeated_hour():
    s = parse_schedule("cron", "0 * * * *", "Europe/Berlin")
    fires = _fires(s, _t(2026, 10, 25, 0, 30), 4)
    assert [int(f.timestamp() - fires[0].timestamp()) for f in fires] == [0, 3600, 7200, 10800]


def test_weekday_morning_cron_in_its_time_zone():
    s = parse_schedule("cron", "0 9 * * 1-5", "America/New_York")
    at = next_fire(
        s, datetime(2026, 11, 27, 10, 0, tzinfo=ZoneInfo("America/New_York")).timestamp()
    )
    d = datetime.fromtimestamp(at, ZoneInfo("America/New_York"))
    assert (d.weekday(), d.hour, d.minute, d.day) == (0, 9, 0, 30)  # Friday 10:00 -> Monday


def test_interval_counts_from_its_anchor_and_once_fires_once():
    s = parse_schedule("interval", "90", anchor=1000.0)
    assert next_fire(s, 1000.0) == 1090.0
    assert next_fire(s, 1090.0) == 1180.0
    assert next_fire(s, 1100.5) == 1180.0
    once = parse_schedule("once", "2026-12-01T09:00", "Europe/Berlin")
    at = _t(2026, 12, 1, 9, 0)
    assert next_fire(once, at - 1) == at
    assert next_fire(once, at) is None


@pytest.mark.parametrize(("kind", "spec", "tz"), [
    ("cron", "61 * * * *", "UTC"), ("cron", "* * *", "UTC"), ("interval", "5", "UTC"),
    ("once", "tomorrow", "UTC"), ("cron", "0 9 * * *", "Mars/Olympus"), ("weekly", "x", "UTC"),
])  # fmt: skip
def test_bad_schedules_are_validation_errors(kind, spec, tz):
    with pytest.raises(ValidationError_) as err:
        parse_schedule(kind, spec, tz)
    assert err.value.details["reason"] == "bad_schedule"


def test_split_when_reads_the_three_forms():
    assert split_when("every 15m") == ("interval", "900.0")
    assert split_when("every 2") == ("interval", "2.0")
    assert split_when("2026-12-01T09:00") == ("once", "2026-12-01T09:00")
    assert split_when("0 9 * * 1-5") == ("cron", "0 9 * * 1-5")


def test_plan_fire_on_time_late_and_missed():
    s = parse_schedule("interval", "60", anchor=0.0)
    assert plan_fire(s, 600.0, 601.0, "run_once", 30.0) == FirePlan(600.0, 660.0)
    # Down from 600 to 1000: one run for the earliest missed fire, then the next after now.
    assert plan_fire(s, 600.0, 1000.0, "run_once", 30.0) == FirePlan(600.0, 1020.0, missed=True)
    assert plan_fire(s, 600.0, 1000.0, "skip", 30.0) == FirePlan(None, 1020.0, missed=True)
    once = parse_schedule("once", "2026-12-01T09:00")
    at = datetime.fromisoformat("2026-12-01T09:00+00:00").timestamp()
    assert plan_fire(once, at, at + 1, "run_once", 30.0) == FirePlan(at, None)


def test_retry_backoff_doubles_then_gives_up():
    assert [backoff_s(n, 30.0) for n in (1, 2, 3, 4)] == [30.0, 60.0, 120.0, 240.0]
    assert backoff_s(20, 30.0, cap_s=3600.0) == 3600.0
    assert after_failure(1, 2, 10.0, 100.0) == Retry(110.0)
    assert after_failure(2, 2, 10.0, 100.0) == Retry(120.0)
    assert after_failure(3, 2, 10.0, 100.0) == GiveUp(3)
    assert after_failure(1, 5, 10.0, 100.0, retryable=False) == GiveUp(1)
