"""Jobs: the principal's scheduled jobs, a new one, pause, resume, run now, remove, history.

Lists and a job's history of runs (each with the thread it wrote to) are
reads; every change is the tool an agent would call, as the signed-in
principal: ``schedule`` creates (with every check the job service makes:
the tool exists and the principal may call it, arguments valid, schedule and
time zone parse, notification target allowed), ``jobs`` pauses, resumes and
runs now, ``unschedule`` removes. Those tools are in the ``full`` profile; on
a daemon that does not offer them the page still lists the jobs and says how
to turn them on.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from exai.protocol import JobAnswer
from exai.web.console.app import PREFIX, Console
from exai.web.console.views import FormError, job_arguments

__all__ = ["routes"]

_ACTIONS = {"pause": "pause", "resume": "resume", "run": "run_now"}
_JOB_TOOLS = frozenset({"schedule", "jobs", "unschedule"})


def routes(console: Console) -> list[BaseRoute]:
    face = _Jobs(console)
    return [
        Route(f"{PREFIX}/jobs", face.list, methods=["GET"]),
        Route(f"{PREFIX}/jobs", face.create, methods=["POST"]),
        Route(f"{PREFIX}/jobs/{{job_id}}", face.show, methods=["GET"]),
        Route(f"{PREFIX}/jobs/{{job_id}}/{{action}}", face.act, methods=["POST"]),
    ]


class _Jobs:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    def _tools(self, request: Request) -> list[str]:
        offered = self.console.core.tools(self.console.principal(request))
        return [t.name for t in offered if t.name not in _JOB_TOOLS]

    async def list(
        self, request: Request, *, form: dict[str, str] | None = None, status: int = 200
    ) -> Response:
        principal = self.console.principal(request)
        jobs = await self.reads.jobs(principal)
        offered = {t.name for t in self.console.core.tools()}
        threads = await self.reads.threads(principal, limit=50)
        return self.console.page(
            request,
            "jobs.html",
            jobs=jobs,
            tools=self._tools(request),
            form=form or {},
            status=status,
            threads=threads,
            # Why jobs cannot be made here, if they cannot: the daemon offers no job
            # tools, or the signed-in token's scopes leave them out.
            daemon_offers_jobs="schedule" in offered,
            scopes_leave_out_jobs=not principal.may_call("schedule"),
        )

    async def create(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        session = self.console.session(request)
        try:
            arguments = job_arguments(fields)
        except FormError as exc:
            session.flash("error", f"The job was not created: {exc}")
            return await self.list(request, form=fields, status=400)
        result = await self.console.call(request, "schedule", arguments)
        if result.error is not None:
            session.flash(
                "error",
                "The job was not created: " + self.console.explain("schedule", result.error),
            )
            return await self.list(request, form=fields, status=400)
        job = JobAnswer.of(result.metadata).job or {}
        session.flash("ok", f"Scheduled {job.get('name') or 'the job'}.")
        return self.console.redirect(f"{PREFIX}/jobs/{job.get('id', '')}")

    async def show(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = await self.reads.job(self.console.principal(request), job_id)
        if job is None:
            return self.console.refused(request, 404, f"There is no job {job_id!r} of yours.")
        return self.console.page(
            request,
            "job.html",
            job=job,
            arguments=json.dumps(job["arguments"], indent=2, ensure_ascii=False),
        )

    async def act(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        job_id, action = request.path_params["job_id"], request.path_params["action"]
        session = self.console.session(request)
        tool: str
        arguments: dict[str, Any]
        if action == "delete":
            tool, arguments = "unschedule", {"id": job_id}
        elif action in _ACTIONS:
            tool, arguments = "jobs", {"id": job_id, "action": _ACTIONS[action]}
        else:
            return self.console.refused(request, 404, f"Jobs have no action {action!r}.")
        result = await self.console.call(request, tool, arguments)
        if result.error is not None:
            session.flash("error", self.console.explain(tool, result.error))
            return self.console.redirect(f"{PREFIX}/jobs/{job_id}")
        done = {
            "pause": "Paused.",
            "resume": "Resumed.",
            "delete": "Removed.",
            "run": "Queued a run now; it starts within a tick.",
        }
        if action == "run":
            job = await self.reads.job(self.console.principal(request), job_id)
            if job is not None and job["paused"]:
                done["run"] = "Queued a run; the job is paused, so it starts when you resume it."
        session.flash("ok", done[action])
        return self.console.redirect(
            f"{PREFIX}/jobs" if action == "delete" else f"{PREFIX}/jobs/{job_id}"
        )
