"""Creating and managing jobs, with every check that guards them, for tools and the CLI.

A job is checked when it is created: the tool exists and is not itself a job
tool, the owner may call it (its scopes, its token's budget and its credential
are recorded with the job: the dispatcher checks the scopes and the budget
again on every run, and the runner asks whether the credential still grants
anything, so a job can never do more, or for longer, than its owner could by
hand), the arguments are valid for the tool, the schedule parses and fires
within the range a date can hold, the notification target is an http(s) URL (a
webhook only when ``EXAI_JOBS_WEBHOOK_SECRET`` is set, since it is always
signed) that the address rule of :mod:`exai.jobs.targets` allows (checked on the
URL, then on what its host resolves to), the thread to continue belongs to the
owner, and the owner is under ``EXAI_JOBS_MAX_PER_PRINCIPAL``. Creation is
idempotent on the owner's idempotency key.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pydantic

from exai import tracing
from exai.auth import Principal, budget_to_claim
from exai.errors import ForbiddenError, ToolNotFoundError, ValidationError_
from exai.jobs.base import Job, JobStore, NewJob, Owner
from exai.jobs.notify import host_refused
from exai.jobs.policy import MISSED_POLICIES
from exai.jobs.schedule import next_fire, parse_schedule
from exai.jobs.targets import Resolver, refused_on_lookup, system_resolve
from exai.protocol import describe_validation_error
from exai.redact import mask_url
from exai.settings import Settings

__all__ = ["JOB_TOOLS", "JobService", "JobSpec"]

# Tools a job may not run: a job that schedules jobs would multiply itself.
JOB_TOOLS = frozenset({"schedule", "jobs", "unschedule"})


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a person or an agent asks for; checked by :meth:`JobService.create`."""

    tool: str
    arguments: dict[str, Any]
    schedule_kind: str
    schedule: str
    timezone: str = "UTC"
    name: str = ""
    thread_id: str | None = None
    max_retries: int = 3
    backoff_s: float = 30.0
    timeout_s: float | None = None
    missed: str = "run_once"
    notify: dict[str, Any] | None = None
    idempotency_key: str | None = None


class JobService:
    """The store plus the rules; ``registry`` and ``conversations`` may be None
    (the CLI, with no daemon), and then those checks are left to the run."""

    def __init__(
        self,
        store: JobStore,
        settings: Settings,
        *,
        registry: Any = None,
        conversations: Any = None,
        clock: Callable[[], float] = time.time,
        resolve: Resolver = system_resolve,
    ) -> None:
        self.store = store
        self.settings = settings
        self.registry = registry
        self.conversations = conversations
        self.clock = clock
        self.resolve = resolve

    async def create(self, principal: Principal, spec: JobSpec) -> tuple[Job, bool]:
        s = self.settings
        if spec.tool in JOB_TOOLS:
            raise ValidationError_(f"a job cannot run {spec.tool!r}",
                                   details={"reason": "job_tool"})  # fmt: skip
        if not principal.may_call(spec.tool):
            raise ForbiddenError(f"principal {principal.name!r} may not call {spec.tool!r}, "
                                 "so no job of theirs may either")  # fmt: skip
        if self.registry is not None:
            tool = self.registry.get(spec.tool)
            if tool is None:
                raise ToolNotFoundError(f"unknown tool {spec.tool[:128]!r}")
            try:
                tool.Input.model_validate(spec.arguments)
            except pydantic.ValidationError as exc:
                listed, details = describe_validation_error(exc, whole="(arguments)", listed=8)
                raise ValidationError_(f"invalid arguments for {spec.tool}: {listed}",
                                       details=details) from None  # fmt: skip
        if spec.missed not in MISSED_POLICIES:
            raise ValidationError_(f"missed must be one of {', '.join(MISSED_POLICIES)}")
        now = self.clock()
        schedule = parse_schedule(spec.schedule_kind, spec.schedule, spec.timezone, anchor=now,
                                  min_interval_s=s.jobs_min_interval_s)  # fmt: skip
        first = next_fire(schedule, now)
        if first is None:
            raise ValidationError_("that schedule never fires after now (a one-time schedule "
                                   "in the past?)", details={"reason": "bad_schedule"})  # fmt: skip
        notify = _check_notify(spec.notify, webhook_ok=s.jobs_webhook_secret is not None,
                               hosts=s.jobs_notify_hosts)  # fmt: skip
        if notify is not None:
            refused = await refused_on_lookup(notify["url"], s.jobs_notify_hosts, self.resolve,
                                              s.jobs_notify_timeout_s)  # fmt: skip
            if refused is not None:
                raise ValidationError_(refused, details={"reason": "notify_host_not_allowed"})
        if spec.thread_id and self.conversations is not None:
            await self.conversations.get_thread(spec.thread_id, principal.name)
        mine = await self.store.list_jobs(principal.name)
        retried = any(j.idempotency_key == spec.idempotency_key for j in mine)
        if spec.idempotency_key is None or not retried:
            if len(mine) >= s.jobs_max_per_principal:
                raise ValidationError_(
                    f"{principal.name!r} has {len(mine)} jobs, the most allowed "
                    "(EXAI_JOBS_MAX_PER_PRINCIPAL); remove one first",
                    details={"reason": "too_many_jobs"},
                )
        new = NewJob(
            owner=principal.name, name=spec.name or f"{spec.tool} {spec.schedule}"[:120],
            tool=spec.tool, arguments=spec.arguments, schedule=schedule,
            thread_id=spec.thread_id, max_retries=spec.max_retries, backoff_s=spec.backoff_s,
            timeout_s=spec.timeout_s, missed=spec.missed, notify=notify,
            idempotency_key=spec.idempotency_key, **_grant(principal),
            trace_context=tracing.carrier() or None,
        )  # fmt: skip
        return await self.store.create_job(new, first, now)

    async def pause(self, job_id: str, owner: Owner) -> Job:
        return await self.store.set_state(job_id, owner, paused=True, next_run_at=None,
                                          now=self.clock())  # fmt: skip

    async def resume(self, job_id: str, owner: Owner, grant: Principal | None = None) -> Job:
        """Unpause (and re-enable a job disabled by failures); it fires next on schedule.

        ``grant``: the owner resuming it with a credential of theirs (the ``jobs``
        tool), under which the job then runs: its scopes, budget and credential
        replace those recorded, so a job paused because its credential expired
        runs again under the one presented now. The operator's resume (``exai
        jobs resume``) keeps the grant recorded.
        """
        now = self.clock()
        job = await self.store.get_job(job_id, owner)
        if grant is not None:
            if not grant.may_call(job.tool):
                raise ForbiddenError(f"principal {grant.name!r} may not call {job.tool!r}, "
                                     "so cannot resume a job that does")  # fmt: skip
            await self.store.set_grant(job_id, owner, now=now, **_grant(grant))
        return await self.store.set_state(
            job_id,
            owner,
            paused=False,
            enabled=True,
            next_run_at=next_fire(job.schedule, now),
            now=now,
        )

    async def run_now(self, job_id: str, owner: Owner) -> Any:
        return await self.store.add_manual_run(job_id, owner, self.clock())

    async def show(self, job_id: str, owner: Owner, runs: int = 10) -> dict[str, Any]:
        job = await self.store.get_job(job_id, owner)
        out = job.public()
        out["runs"] = [r.public() for r in await self.store.runs(job_id, owner, runs)]
        out["notifications"] = [n.public() for n in await self.store.notifications(job_id, owner)]
        out["undeliverable"] = sum(n["status"] == "undeliverable" for n in out["notifications"])
        return out


def _grant(principal: Principal) -> dict[str, Any]:
    """What a job records of the grant ``principal`` acts under."""
    return {
        "scopes": None if principal.scopes is None else sorted(principal.scopes),
        "budget": None if principal.budget is None else budget_to_claim(principal.budget),
        "credential": principal.credential,
        "models": None if principal.models is None else sorted(principal.models),
    }


def _check_notify(
    notify: dict[str, Any] | None, *, webhook_ok: bool, hosts: list[str]
) -> dict[str, Any] | None:
    if not notify:
        return None
    kind, url = notify.get("kind"), str(notify.get("url") or "")
    if kind not in ("ntfy", "webhook"):
        raise ValidationError_("notify.kind must be 'ntfy' or 'webhook'")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port out of range or not a number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError_(f"notify.url must be an http(s) URL (got "
                               f"{mask_url(url[:200])!r})")  # fmt: skip
    if kind == "webhook" and not webhook_ok:
        raise ValidationError_(
            "webhook notifications are signed: set EXAI_JOBS_WEBHOOK_SECRET on the daemon first",
            details={"reason": "no_webhook_secret"},
        )
    refused = host_refused(url, hosts)
    if refused is not None:
        raise ValidationError_(refused, details={"reason": "notify_host_not_allowed"})
    return {"kind": kind, "url": url}
