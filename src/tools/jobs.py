"""``schedule``, ``jobs`` and ``unschedule``: an agent schedules work for its user.

Each acts for the calling principal only: a job belongs to whoever scheduled
it, runs with that principal's scopes (a job cannot call a tool its owner may
not), and to anyone else does not exist. Creation is idempotent: on the given
``idempotency_key``, or else on the call's own request key, so a client's retry
of the same ``schedule`` call gets the job it already made.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from exai.errors import ToolNotFoundError, UnavailableError
from exai.jobs.schedule import split_when
from exai.jobs.service import JobService, JobSpec
from exai.protocol import JobAnswer
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult

__all__ = ["TOOLS", "JobsTool", "ScheduleTool", "UnscheduleTool"]


def _service(context: ToolContext) -> JobService:
    services = context.services
    jobs = services.jobs
    if jobs is None:
        if not services.settings.jobs_enabled:
            raise ToolNotFoundError(f"{context.tool}: scheduled jobs are off on this daemon "
                                    "(EXAI_JOBS_ENABLED=false)")  # fmt: skip
        # The composition root builds the job service before any face listens, so
        # no call should find it missing; if one ever does, it is early, not wrong.
        raise UnavailableError("the job service is not up yet on this daemon; try again",
                               retry_after_s=1.0)  # fmt: skip
    service: JobService = jobs
    return service


class ScheduleInput(ToolInput):
    tool: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] = Field(default_factory=dict)
    when: str = Field(min_length=1, max_length=200, description=(
        "5-field cron ('0 9 * * 1-5'), an ISO time for once, or 'every 30m'"))  # fmt: skip
    timezone: str = Field(default="UTC", max_length=64)
    name: str = Field(default="", max_length=120)
    continuation_id: str | None = Field(default=None, max_length=64)
    notify_url: str = Field(default="", max_length=2000)
    notify_kind: Literal["ntfy", "webhook"] = "ntfy"
    missed: Literal["run_once", "skip"] = "run_once"
    max_retries: int = Field(default=3, ge=0, le=10)
    idempotency_key: str = Field(default="", max_length=128)


class ScheduleTool(Tool):
    name = "schedule"
    description = ("Run an exai tool later or on a schedule, as you; each run's output lands "
                   "in a thread (continuation_id).")  # fmt: skip
    Input = ScheduleInput
    profile = "full"

    async def run(self, arguments: ScheduleInput, context: ToolContext) -> ToolResult:
        kind, spec = split_when(arguments.when)
        key = arguments.idempotency_key or f"req:{context.session_id}:{context.request_id}"
        notify = ({"kind": arguments.notify_kind, "url": arguments.notify_url}
                  if arguments.notify_url else None)  # fmt: skip
        job, created = await _service(context).create(context.principal, JobSpec(
            tool=arguments.tool, arguments=arguments.arguments, schedule_kind=kind, schedule=spec,
            timezone=arguments.timezone, name=arguments.name,
            thread_id=arguments.continuation_id, max_retries=arguments.max_retries,
            missed=arguments.missed, notify=notify, idempotency_key=key,
        ))  # fmt: skip
        out = {**job.public(), "created": created}
        return ToolResult(json.dumps(out), metadata=JobAnswer(job=out).fields())


class JobsInput(ToolInput):
    id: str = Field(default="", max_length=64)
    action: Literal["list", "show", "pause", "resume", "run_now"] = "list"


class JobsTool(Tool):
    name = "jobs"
    description = "List your scheduled jobs, or show, pause, resume or run one now by id."
    Input = JobsInput
    profile = "full"

    async def run(self, arguments: JobsInput, context: ToolContext) -> ToolResult:
        service, owner = _service(context), context.principal.name
        out: dict[str, Any]
        if arguments.action == "list" and not arguments.id:
            out = {"jobs": [j.public() for j in await service.store.list_jobs(owner)]}
        elif not arguments.id:
            _missing_id(arguments.action)
        elif arguments.action == "pause":
            out = (await service.pause(arguments.id, owner)).public()
        elif arguments.action == "resume":
            # Resumed under the caller's credential: a job paused because the one
            # that made it expired runs on under this one.
            out = (await service.resume(arguments.id, owner, context.principal)).public()
        elif arguments.action == "run_now":
            out = {"run": (await service.run_now(arguments.id, owner)).public()}
        else:
            out = await service.show(arguments.id, owner)
        return ToolResult(json.dumps(out), metadata=JobAnswer(jobs=out).fields())


def _missing_id(action: str) -> None:
    from exai.errors import ValidationError_

    raise ValidationError_(f"jobs action {action!r} needs the job's id")


class UnscheduleInput(ToolInput):
    id: str = Field(min_length=1, max_length=64)


class UnscheduleTool(Tool):
    name = "unschedule"
    description = "Delete one of your scheduled jobs, with its run history."
    Input = UnscheduleInput
    profile = "full"

    async def run(self, arguments: UnscheduleInput, context: ToolContext) -> ToolResult:
        await _service(context).store.delete_job(arguments.id, context.principal.name)
        out = {"id": arguments.id, "removed": True}
        return ToolResult(json.dumps(out), metadata=JobAnswer(job=out).fields())


TOOLS: list[Tool] = [ScheduleTool(), JobsTool(), UnscheduleTool()]
