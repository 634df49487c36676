"""Scheduled jobs: what a job, a run and a notification are, and the store contract.

A job belongs to a principal (its owner, whose scopes, token budget and
credential are recorded with it and apply to every run) and names a tool, its
arguments and a schedule. Each time it fires, the tick inserts a *run*, unique
per (job, scheduled time), which a worker claims under a lease, executes
through the daemon's dispatcher and finishes; its output goes to the job's
conversation thread. A *notification*
(ntfy or a signed webhook) is kept until it is delivered or given up on.

:class:`JobStore` is the storage contract; SQLite and Postgres implement it
with the same SQL (:mod:`exai.jobs.sql`). The decisions (when to fire, retry or
give up) are pure functions in :mod:`exai.jobs.policy` and
:mod:`exai.jobs.schedule`; whether a lease passed is decided by the statement that
resets the run (see :mod:`exai.jobs.policy` for why).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from exai.auth import Credential
from exai.errors import ValidationError_
from exai.jobs.policy import FirePlan
from exai.jobs.schedule import Schedule
from exai.redact import mask_url
from exai.store.base import ANY_OWNER, AnyOwner, Owner

__all__ = [
    "ANY_OWNER",
    "AnyOwner",
    "Claimed",
    "Job",
    "JobNotFoundError",
    "JobStore",
    "NewJob",
    "Notification",
    "Owner",
    "Run",
    "RunStatus",
]

RunStatus = Literal["pending", "running", "succeeded", "failed"]


class JobNotFoundError(ValidationError_):
    """No job with that id for this principal (another principal's is unknown too)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"no job {job_id!r}: it does not exist or was removed; `jobs` or "
            "`exai jobs list` shows the ids there are",
            details={"reason": "job_not_found", "id": job_id},
        )


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job about to be stored. ``scopes`` None: the owner may call every tool.
    ``budget`` (an ``exai_budget`` claim) and ``credential``: the grant of the token
    that made it; None for a job the operator made (``exai jobs add``)."""

    owner: str
    name: str
    tool: str
    arguments: dict[str, Any]
    schedule: Schedule
    scopes: list[str] | None = None
    thread_id: str | None = None
    max_retries: int = 3
    backoff_s: float = 30.0
    timeout_s: float | None = None
    missed: str = "run_once"
    notify: dict[str, Any] | None = None  # {"kind": "ntfy"|"webhook", "url": ...}
    idempotency_key: str | None = None
    budget: dict[str, Any] | None = None
    credential: Credential | None = None
    # traceparent/tracestate of the call that made it, when that call was traced.
    trace_context: dict[str, str] | None = None
    # The models the token that made it may use (None: every model).
    models: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    owner: str
    name: str
    tool: str
    arguments: dict[str, Any]
    schedule: Schedule
    scopes: list[str] | None
    thread_id: str | None
    max_retries: int
    backoff_s: float
    timeout_s: float | None
    missed: str
    notify: dict[str, Any] | None
    enabled: bool
    paused: bool
    next_run_at: float | None
    created_at: float
    updated_at: float
    idempotency_key: str | None = None
    disabled_reason: str | None = None
    budget: dict[str, Any] | None = None
    credential: Credential | None = None
    paused_reason: str | None = None
    trace_context: dict[str, str] | None = None
    models: list[str] | None = None

    def public(self) -> dict[str, Any]:
        """The job as the CLI and the ``jobs`` tool show it, the notification URL's
        credentials masked (user information, query values)."""
        return {
            "id": self.id, "name": self.name, "tool": self.tool, "arguments": self.arguments,
            "schedule": {"kind": self.schedule.kind, "spec": self.schedule.spec,
                         "timezone": self.schedule.timezone},
            "thread_id": self.thread_id, "enabled": self.enabled, "paused": self.paused,
            "next_run_at": self.next_run_at, "max_retries": self.max_retries,
            "backoff_s": self.backoff_s, "missed": self.missed,
            "notify": None if self.notify is None else {
                "kind": self.notify.get("kind"), "url": mask_url(str(self.notify.get("url")))},
            "disabled_reason": self.disabled_reason, "paused_reason": self.paused_reason,
            "budget": self.budget, "models": self.models,
            "credential": None if self.credential is None else self.credential.public(),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    job_id: str
    owner: str
    scheduled_for: float
    status: str
    attempt: int
    not_before: float
    locked_by: str | None
    locked_until: float | None
    started_at: float | None
    finished_at: float | None
    error_code: str | None
    error: str | None
    output: str | None
    thread_id: str | None
    manual: bool
    created_at: float

    def public(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        if out["output"] and len(out["output"]) > 2000:
            out["output"] = out["output"][:2000] + "…"
        return out


@dataclass(frozen=True, slots=True)
class Claimed:
    """A run this worker holds, with its job as it stood when claimed."""

    run: Run
    job: Job


@dataclass(frozen=True, slots=True)
class Notification:
    id: str
    job_id: str
    run_id: str | None
    owner: str
    kind: str
    url: str
    payload: dict[str, Any]
    status: str  # pending | delivered | undeliverable
    attempts: int
    next_attempt_at: float
    last_error: str | None
    created_at: float
    delivered_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The notification as it is shown: its URL's credentials masked (only the
        send itself reads :attr:`url`)."""
        return {"id": self.id, "run_id": self.run_id, "kind": self.kind, "url": mask_url(self.url),
                "status": self.status, "attempts": self.attempts,
                "last_error": self.last_error, "created_at": self.created_at,
                "delivered_at": self.delivered_at}  # fmt: skip


Planner = Callable[[Job, float], FirePlan]


class JobStore(ABC):
    """Jobs, their runs and notifications. Times are Unix epoch seconds, passed in."""

    # --- jobs ---------------------------------------------------------------

    @abstractmethod
    async def create_job(self, new: NewJob, next_run_at: float | None, now: float
                         ) -> tuple[Job, bool]:  # fmt: skip
        """Store a job; idempotent on (owner, ``idempotency_key``) when a key is given:
        the job that key already created is returned with ``False``."""

    @abstractmethod
    async def get_job(self, job_id: str, owner: Owner) -> Job: ...

    @abstractmethod
    async def list_jobs(self, owner: Owner) -> list[Job]: ...

    @abstractmethod
    async def set_state(self, job_id: str, owner: Owner, *, paused: bool | None = None,
                        enabled: bool | None = None, next_run_at: float | None = None,
                        reason: str | None = None, now: float) -> Job:  # fmt: skip
        """Pause, resume, enable or disable a job; ``next_run_at`` is set as given.
        ``reason`` is kept as ``disabled_reason`` when disabling, as ``paused_reason``
        when pausing; resuming or enabling clears it."""

    @abstractmethod
    async def set_grant(self, job_id: str, owner: Owner, *, scopes: list[str] | None,
                        budget: dict[str, Any] | None, credential: Credential | None,
                        now: float, models: list[str] | None = None) -> Job:  # fmt: skip
        """Put the job under another grant (its owner's, presented again)."""

    @abstractmethod
    async def set_thread(self, job_id: str, thread_id: str, now: float) -> None: ...

    @abstractmethod
    async def delete_job(self, job_id: str, owner: Owner) -> None:
        """Remove a job with its runs and notifications."""

    # --- the tick -------------------------------------------------------------

    @abstractmethod
    async def reset_abandoned(self, now: float) -> int:
        """Runs whose lease passed go back to pending, to be claimed again."""

    @abstractmethod
    async def fire_due(self, now: float, limit: int, plan: Planner) -> int:
        """For each enabled, unpaused job due at ``now``: insert the run ``plan``
        asks for (``UNIQUE (job_id, scheduled_for)``, conflicts ignored) and move
        ``next_run_at``. Returns the runs inserted."""

    @abstractmethod
    async def add_manual_run(self, job_id: str, owner: Owner, now: float) -> Run: ...

    @abstractmethod
    async def claim(self, worker: str, now: float, lease_s: float, limit: int) -> list[Claimed]:
        """Take up to ``limit`` pending runs whose time has come, under a lease."""

    @abstractmethod
    async def refresh_lease(self, run_id: str, worker: str, until: float) -> bool:
        """Extend a held lease; False when this worker no longer holds the run."""

    @abstractmethod
    async def finish(self, run_id: str, worker: str, *, status: str, now: float,
                     output: str | None = None, error_code: str | None = None,
                     error: str | None = None, thread_id: str | None = None,
                     not_before: float | None = None, disable_job: str | None = None,
                     pause_job: str | None = None, deferred: bool = False) -> bool:  # fmt: skip
        """End an attempt held by ``worker``: ``succeeded``, ``failed``, or
        ``pending`` again at ``not_before`` (a retry). ``deferred`` gives the
        attempt back: the run never started (the daemon put it off), so it does
        not count against the job's retries. ``disable_job`` gives the
        reason to disable the job in the same transaction, ``pause_job`` the reason
        to pause it. False when the lease was lost (another worker reclaimed the
        run); nothing is written then."""

    @abstractmethod
    async def runs(self, job_id: str, owner: Owner, limit: int = 20) -> list[Run]: ...

    @abstractmethod
    async def get_run(self, run_id: str) -> Run: ...

    # --- notifications ----------------------------------------------------------

    @abstractmethod
    async def add_notification(
        self, job: Job, run_id: str | None, payload: dict[str, Any], now: float
    ) -> Notification: ...

    @abstractmethod
    async def due_notifications(self, worker: str, now: float, lease_s: float,
                                limit: int) -> list[Notification]:  # fmt: skip
        """Pending notifications whose next attempt has come, leased to ``worker``."""

    @abstractmethod
    async def notification_result(self, notification_id: str, *, delivered: bool, now: float,
                                  error: str | None, next_attempt_at: float | None
                                  ) -> Notification:  # fmt: skip
        """Record one attempt. ``next_attempt_at`` None on a failure: given up
        (``undeliverable``, kept and shown)."""

    @abstractmethod
    async def notifications(self, job_id: str, owner: Owner, limit: int = 20
                            ) -> list[Notification]: ...  # fmt: skip

    async def aclose(self) -> None:
        return None
