"""When a job fires: its schedule, parsed and checked, and the next fire time.

Pure functions of a schedule and a moment (Unix epoch seconds); no clock is
read here, so every rule is tested with the times it names.

Three kinds of schedule, each with an IANA time zone:

* ``cron``: a five-field expression, parsed by ``cronsim`` (the library
  Healthchecks.io runs on), evaluated in the job's time zone. Across a daylight
  saving change it behaves as Debian's cron does, which cronsim copies: a job
  at a wall-clock time that does not exist that day (02:30 when clocks jump from
  02:00 to 03:00) runs once, at the first moment after the gap (03:00 local); a
  job at a time that happens twice (02:30 when clocks fall back from 03:00 to
  02:00) runs once, at the first of the two. Expressions whose minute or hour
  is a wildcard (``*/15 * * * *``) follow real elapsed time instead, and so run
  in both copies of a repeated hour.
* ``once``: an ISO 8601 date and time; without an offset it is read in the
  job's time zone. It fires once.
* ``interval``: every N seconds, counted from the moment the job was created.

Every schedule is checked to fire within the range a date can hold: an interval
is at most :data:`MAX_INTERVAL_S` (100 years) and a one-time schedule lies
before :data:`LATEST_FIRE` (the start of the year 9000, UTC), so every fire
time a job ever gets can be shown as a date. A time zone is a name from the
IANA database (:func:`known_zone`), at most 64 characters.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from exai.errors import ValidationError_

__all__ = [
    "LATEST_FIRE",
    "MAX_INTERVAL_S",
    "SCHEDULE_KINDS",
    "Schedule",
    "ScheduleKind",
    "known_zone",
    "next_fire",
    "parse_schedule",
    "split_when",
]

ScheduleKind = Literal["cron", "once", "interval"]
SCHEDULE_KINDS: Final[tuple[str, ...]] = ("cron", "once", "interval")
MAX_INTERVAL_S: Final = 100 * 365.25 * 86400.0
# Far enough below datetime's year 9999 that no time zone offset takes it past.
LATEST_FIRE: Final = datetime(9000, 1, 1, tzinfo=UTC).timestamp()
_ZONE_NAME: Final = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
_MAX_ZONE_CHARS: Final = 64


@dataclass(frozen=True, slots=True)
class Schedule:
    """A checked schedule. ``anchor`` is where an interval counts from."""

    kind: ScheduleKind
    spec: str
    timezone: str = "UTC"
    anchor: float = 0.0

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


def _bad(message: str, **details: object) -> ValidationError_:
    return ValidationError_(message, details={"reason": "bad_schedule", **details})


def parse_schedule(
    kind: str, spec: str, timezone: str = "UTC", *, anchor: float = 0.0,
    min_interval_s: float = 60.0,
) -> Schedule:  # fmt: skip
    """Check a schedule given by a person or an agent; raise ``VALIDATION_ERROR`` if bad."""
    if kind not in SCHEDULE_KINDS:
        raise _bad(f"schedule kind must be one of {', '.join(SCHEDULE_KINDS)} (got {kind!r})")
    zone = known_zone(timezone)
    if zone is None:
        shown = timezone if len(timezone) <= _MAX_ZONE_CHARS else timezone[:_MAX_ZONE_CHARS] + "…"
        raise _bad(f"unknown time zone {shown!r}; use an IANA name such as "
                   "'Europe/Berlin' or 'UTC'", timezone=shown) from None  # fmt: skip
    spec = spec.strip()
    if kind == "cron":
        if len(spec.split()) != 5:
            raise _bad(f"a cron schedule has five fields (minute hour day month weekday); "
                       f"got {spec!r}")  # fmt: skip
        try:
            CronSim(spec, datetime(2026, 1, 1, tzinfo=zone))
        except CronSimError as exc:
            raise _bad(f"bad cron expression {spec!r}: {exc}") from None
    elif kind == "once":
        if _once_at(spec, zone) >= LATEST_FIRE:
            raise _bad(f"a one-time schedule must lie before the year 9000 (got {spec[:64]!r})")
    else:
        try:
            seconds = float(spec)
        except ValueError:
            raise _bad(f"an interval is a number of seconds (got {spec!r})") from None
        if not math.isfinite(seconds) or seconds < min_interval_s:
            raise _bad(f"an interval must be at least {min_interval_s:g} s "
                       "(EXAI_JOBS_MIN_INTERVAL_S)", min_interval_s=min_interval_s)  # fmt: skip
        if seconds > MAX_INTERVAL_S or anchor + seconds >= LATEST_FIRE:
            raise _bad(f"an interval must be at most {MAX_INTERVAL_S:.0f} s (100 years); "
                       f"got {seconds:g} s", max_interval_s=MAX_INTERVAL_S)  # fmt: skip
        spec = repr(seconds)
    return Schedule(kind, spec, timezone, anchor)  # type: ignore[arg-type]


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def known_zone(name: str) -> ZoneInfo | None:
    """The IANA time zone ``name`` names, or None: checked by name against the time
    zone database before any file is opened for it."""
    if len(name) > _MAX_ZONE_CHARS or not _ZONE_NAME.fullmatch(name):
        return None
    names = _zone_names()
    if names and name not in names:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def split_when(when: str) -> tuple[str, str]:
    """One string for all three kinds, as a person types it: ``every 15m`` (s, m,
    h or d; bare numbers are seconds), an ISO time such as ``2026-12-01T09:00``, or
    else a cron expression. Returns ``(kind, spec)`` for :func:`parse_schedule`."""
    text = when.strip()
    if text.lower().startswith("every "):
        amount = text[6:].strip().lower()
        unit = _UNITS.get(amount[-1:], 0)
        number = amount[:-1] if unit else amount
        try:
            return "interval", repr(float(number) * (unit or 1))
        except ValueError:
            raise _bad(f"'every' takes a number and an optional unit s, m, h or d "
                       f"(got {when!r})") from None  # fmt: skip
    if text[:4].isdigit() and text[4:5] == "-":
        return "once", text
    return "cron", text


def _once_at(spec: str, zone: ZoneInfo) -> float:
    try:
        moment = datetime.fromisoformat(spec)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
        return moment.timestamp()
    except (ValueError, OverflowError):
        raise _bad(f"a one-time schedule is an ISO 8601 time such as "
                   f"'2026-12-01T09:00' (got {spec[:64]!r})") from None  # fmt: skip


def next_fire(schedule: Schedule, after: float) -> float | None:
    """The first fire time strictly after ``after``, or None when there is none."""
    if schedule.kind == "once":
        at = _once_at(schedule.spec, schedule.zone)
        return at if at > after else None
    if schedule.kind == "interval":
        step = float(schedule.spec)
        if after < schedule.anchor:
            return schedule.anchor
        periods = math.floor((after - schedule.anchor) / step) + 1
        return schedule.anchor + periods * step
    start = datetime.fromtimestamp(math.floor(after), UTC).astimezone(schedule.zone)
    for moment in CronSim(schedule.spec, start):
        at = moment.timestamp()
        if at > after:
            return at
    return None  # pragma: no cover - cronsim iterates forever
