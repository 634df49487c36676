"""The tick's decisions, apart from any database or clock.

Each function takes the moment it decides for (``now``, Unix epoch seconds) and
what the stores read, and returns what to write. The stores and the runner
carry the answers out; tests check the rules on their own.

* :func:`plan_fire`: a due job, what run to insert and where ``next_run_at``
  goes, including the missed-fire policy.
* :func:`after_failure`: retry with exponential backoff, or give up.
* :func:`notify_delay`: when a notification that failed to send is tried again.

Whether a run's lease has passed is not decided here but in the statement that
hands the run out again (:meth:`~exai.jobs.sql.SqlJobStore.reset_abandoned`): on
Postgres one ``UPDATE ... WHERE status = 'running' AND locked_until < now``
re-reads a row its worker is renewing at that moment and leaves it alone, and
uses the index of running runs; deciding in Python would mean reading the rows
first, locking them, and a round trip more on every tick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from exai.jobs.schedule import Schedule, next_fire

__all__ = [
    "MISSED_POLICIES",
    "FirePlan",
    "GiveUp",
    "MissedPolicy",
    "Retry",
    "after_failure",
    "backoff_s",
    "notify_delay",
    "plan_fire",
]

MissedPolicy = Literal["run_once", "skip"]
MISSED_POLICIES: Final[tuple[str, ...]] = ("run_once", "skip")


@dataclass(frozen=True, slots=True)
class FirePlan:
    """For one due job: the run to insert (its ``scheduled_for``, or None for
    none) and the job's next ``next_run_at`` (None: it will not fire again)."""

    scheduled_for: float | None
    next_run_at: float | None
    missed: bool = False


def plan_fire(
    schedule: Schedule, next_run_at: float, now: float, missed: MissedPolicy, grace_s: float
) -> FirePlan:
    """What to do with a job whose ``next_run_at`` has come.

    A fire no older than ``grace_s`` is on time: it runs, and ``next_run_at``
    moves to the first fire after it (or after ``now``, so that a daemon behind
    by less than the grace never queues a backlog). An older one was missed,
    the daemon being down or stopped across it: ``run_once`` runs it once, for
    the earliest missed time, however many fires were missed; ``skip`` runs
    nothing. Either way the next fire is the first one after ``now``.
    """
    late = now - next_run_at > grace_s
    following = next_fire(schedule, max(next_run_at, now))
    if not late:
        return FirePlan(next_run_at, following)
    if missed == "skip":
        return FirePlan(None, following, missed=True)
    return FirePlan(next_run_at, following, missed=True)


@dataclass(frozen=True, slots=True)
class Retry:
    at: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    attempts: int


def backoff_s(attempt: int, base_s: float, cap_s: float = 3600.0) -> float:
    """Exponential: ``base_s`` after the first failed attempt, doubling, at most ``cap_s``."""
    return float(min(cap_s, base_s * (2 ** max(0, attempt - 1))))


def after_failure(
    attempt: int, max_retries: int, base_s: float, now: float, *, retryable: bool = True
) -> Retry | GiveUp:
    """After attempt number ``attempt`` (1 = the first) failed: try again, or give up.

    A run gets ``1 + max_retries`` attempts. An error the tool marks as not
    worth retrying (a scope refused, a bad argument) ends it at once.
    """
    if not retryable or attempt > max_retries:
        return GiveUp(attempt)
    return Retry(now + backoff_s(attempt, base_s))


def notify_delay(attempts: int, base_s: float = 2.0, cap_s: float = 300.0) -> float:
    """Seconds before the next try of a notification that failed ``attempts`` times."""
    return backoff_s(attempts, base_s, cap_s)
