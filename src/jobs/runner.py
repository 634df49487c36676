"""The tick: the daemon's scheduler loop, and one run from claim to finish.

Every ``EXAI_JOBS_TICK_S`` each daemon:

1. resets runs whose lease passed (their worker died) so they can be claimed;
2. finds due jobs, inserts one run per fire (``UNIQUE (job_id, scheduled_for)``,
   ``ON CONFLICT DO NOTHING``) and moves ``next_run_at`` on, as
   :func:`~exai.jobs.policy.plan_fire` decides, missed fires included;
3. claims pending runs (``FOR UPDATE SKIP LOCKED`` on Postgres) under a lease;
4. runs each through the core's port as its owner, under the grant recorded
   with the job (scopes and token budget), like a client's call, renewing the
   lease while it runs; first it asks the port whether the credential that made
   the job still grants anything, and if not the run is refused (``UNAUTHORIZED``)
   and the job paused with the reason;
5. finishes it: output to the job's thread; on failure a retry with backoff, or,
   attempts spent, the run failed, the job disabled and its owner notified;
6. sends notifications that are due.

The runner is a face of the core like any other: it receives the
:class:`~exai.port.Port`, not the daemon. A run is a call in a session of its
own, ``job-<run id>``, with request id ``attempt-<n>``: limits, scopes,
deadlines, audit and cost accounting are the dispatcher's, and a tool that
stores turns by request key (``chat``) finds the turn an attempt already
stored if that attempt is run again after a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from exai import tracing
from exai.auth import Principal, budget_from_claim
from exai.errors import ConversationNotFoundError
from exai.jobs.base import Claimed, Job, JobStore
from exai.jobs.notify import host_refused, send
from exai.jobs.policy import GiveUp, after_failure, notify_delay, plan_fire
from exai.jobs.policy import MissedPolicy as _Missed
from exai.logs import get_logger
from exai.port import Port
from exai.protocol import CallToolResult

__all__ = ["DEFERRED", "NOT_RETRYABLE", "JobRunner"]

log = get_logger("exai.jobs")

# Errors another attempt cannot fix: the job is wrong, not the moment.
NOT_RETRYABLE = frozenset({"FORBIDDEN", "TOOL_NOT_FOUND", "VALIDATION_ERROR",
                           "CONVERSATION_NOT_FOUND", "REQUEST_ID_REUSED"})  # fmt: skip
# The daemon's own pushback before the tool ran (the owner's rate limit, no room
# for another call): the run waits and goes again without spending an attempt.
# Counted as failures, a burst of the owner's interactive calls, or many jobs due
# at once, would use up a job's retries and disable it. A vendor's 429 is also
# RATE_LIMITED but names its provider: that one is a failed attempt like any other.
# Put off for longer than the misfire grace, a run counts its refusals again: a
# load that never lets it through (jobs firing faster than their owner's rate
# limit) must end in retries and a disabled job, not in runs that pile up.
DEFERRED = frozenset({"RATE_LIMITED", "OVER_CAPACITY"})
_DEFER_S = 1.0  # when the refusal names no retry_after_s
_MAX_OUTPUT = 100_000


class JobRunner:
    def __init__(self, core: Port, store: JobStore, conversations: Any = None,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.core = core
        self.store = store
        self.conversations = conversations  # the conversation store, for tools that keep none
        self.settings = core.settings
        self.clock = clock
        self.worker = f"{core.settings.ws_host}:{secrets.token_hex(6)}"
        self.running: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.Task[None] | None = None
        self._http = httpx.AsyncClient(timeout=self.settings.jobs_notify_timeout_s)
        self.ticks = 0

    def start(self) -> None:
        self._loop = asyncio.create_task(self._forever(), name="exai-jobs-tick")

    async def aclose(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        for task in list(self.running.values()):
            task.cancel()
        if self.running:
            await asyncio.wait(list(self.running.values()), timeout=5.0)
        await self._http.aclose()

    async def _forever(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("job tick failed")
            await asyncio.sleep(self.settings.jobs_tick_s)

    def _plan(self, job: Job, now: float) -> Any:
        assert job.next_run_at is not None
        missed: _Missed = "skip" if job.missed == "skip" else "run_once"
        return plan_fire(job.schedule, job.next_run_at, now, missed,
                         self.settings.jobs_misfire_grace_s)  # fmt: skip

    async def tick(self) -> int:
        """One pass of the sequence above; returns the runs started."""
        s, now = self.settings, self.clock()
        self.ticks += 1
        await self.store.reset_abandoned(now)
        await self.store.fire_due(now, s.jobs_batch * 10, self._plan)
        room = s.jobs_batch - len(self.running)
        started = 0
        if room > 0 and not self.core.draining:
            for claimed in await self.store.claim(self.worker, now, s.jobs_lease_s, room):
                task = asyncio.create_task(self.execute(claimed), name=f"job:{claimed.run.id}")
                self.running[claimed.run.id] = task
                task.add_done_callback(functools.partial(self._done, claimed.run.id))
                started += 1
        await self.deliver_notifications()
        return started

    def _done(self, run_id: str, _task: asyncio.Task[None]) -> None:
        self.running.pop(run_id, None)

    # --- one run ------------------------------------------------------------

    async def execute(self, claimed: Claimed) -> None:
        run, job = claimed.run, claimed.job
        checked_at = self.clock()
        problem = self.core.credential_problem(job.owner, job.credential, checked_at)
        if problem is not None:
            await self._refuse(claimed, problem, checked_at)
            return
        budget = None if job.budget is None else budget_from_claim(job.budget)
        principal = Principal(job.owner, None if job.scopes is None else frozenset(job.scopes),
                              method="job", budget=budget, credential=job.credential,
                              models=None if job.models is None else frozenset(job.models),
                              )  # fmt: skip
        arguments = dict(job.arguments)
        schema = self.core.tool_schema(job.tool)
        continues = schema is not None and "continuation_id" in schema.get("properties", {})
        if continues and job.thread_id and not arguments.get("continuation_id"):
            arguments["continuation_id"] = job.thread_id
        client = self.core.connect(principal, session_id=f"job-{run.id}", face="job")
        # Each run is a trace of its own (no caller is waiting on it), linked to the
        # call that made the job; the job's attributes tie its runs together.
        with tracing.span(
            f"job {job.tool}", kind=tracing.SERVER, parent=tracing.ROOT,
            links=tracing.links_to(job.trace_context),
            attributes={"exai.face": "jobs", "exai.job.id": job.id, "exai.job.name": job.name,
                        "exai.job.run_id": run.id, "exai.job.attempt": run.attempt,
                        "exai.principal": job.owner, "gen_ai.tool.name": job.tool,
                        "gen_ai.conversation.id": job.thread_id},
        ):  # fmt: skip
            call = asyncio.ensure_future(client.call(job.tool, arguments,
                                                     request_id=f"attempt-{run.attempt}",
                                                     timeout_s=job.timeout_s))  # fmt: skip
            keeper = asyncio.create_task(self._keep_lease(run.id, call))
            try:
                result = await call
            except asyncio.CancelledError:
                if not call.cancelled():
                    raise
                log.warning(
                    "job run stopped: lease lost or daemon stopping", run_id=run.id, job_id=job.id
                )
                return
            finally:
                keeper.cancel()
                client.close()
            if result.error is not None:
                tracing.fail_current(result.error)
            await self._finish(claimed, result)

    async def _refuse(self, claimed: Claimed, problem: str, checked_at: float) -> None:
        """The job's credential no longer grants it: no call; the job is paused.

        The run was claimed (``started_at``) a moment before the check, so it can
        start before a JWT's ``exp`` and still be refused; it finishes at the time
        the check was made, which is what decided it.
        """
        run, job = claimed.run, claimed.job
        reason = f"paused: {problem}"
        held = await self.store.finish(run.id, self.worker, status="failed", now=checked_at,
                                       error_code="UNAUTHORIZED", error=reason,
                                       pause_job=reason)  # fmt: skip
        log.warning("job paused: its credential no longer grants it", job_id=job.id,
                    run_id=run.id, reason=problem)  # fmt: skip
        if held and job.notify:
            await self._notify(job, run.id, "refused", job.thread_id, error=reason)

    async def _keep_lease(self, run_id: str, call: asyncio.Future[Any]) -> None:
        lease = self.settings.jobs_lease_s
        while not call.done():
            await asyncio.sleep(lease / 3)
            try:
                held = await self.store.refresh_lease(run_id, self.worker, self.clock() + lease)
            except Exception:
                log.exception("renewing a job lease failed", run_id=run_id)
                continue
            if not held:
                call.cancel()
                return

    async def _finish(self, claimed: Claimed, result: CallToolResult) -> None:
        run, job = claimed.run, claimed.job
        now = self.clock()
        text = "\n".join(o.text for o in result.outputs)
        if result.error is None:
            thread_id = result.metadata.continuation_id
            if thread_id is None:
                thread_id = await self._append_to_thread(job, run.id, run.scheduled_for, text)
            held = await self.store.finish(
                run.id,
                self.worker,
                status="succeeded",
                now=now,
                output=text[:_MAX_OUTPUT],
                thread_id=thread_id,
            )
            if held and thread_id and thread_id != job.thread_id:
                await self.store.set_thread(job.id, thread_id, now)
            if held and job.notify:
                await self._notify(job, run.id, "succeeded", thread_id, excerpt=text[:300])
            return
        code, message = result.error.code.value, result.error.message
        if (code in DEFERRED and "provider" not in (result.error.details or {})
                and now - run.scheduled_for <= self.settings.jobs_misfire_grace_s):  # fmt: skip
            wait = result.error.retry_after_s or _DEFER_S
            log.info("job run put off", job_id=job.id, run_id=run.id, error_code=code,
                     retry_in_s=wait)  # fmt: skip
            await self.store.finish(run.id, self.worker, status="pending", now=now,
                                    error_code=code, error=message[:2000],
                                    not_before=now + wait, deferred=True)  # fmt: skip
            return
        decision = after_failure(run.attempt, job.max_retries, job.backoff_s, now,
                                 retryable=code not in NOT_RETRYABLE)  # fmt: skip
        if isinstance(decision, GiveUp):
            reason = f"run {run.id} failed after {decision.attempts} attempt(s): {code}"
            held = await self.store.finish(run.id, self.worker, status="failed", now=now,
                                           error_code=code, error=message[:2000],
                                           disable_job=reason)  # fmt: skip
            log.warning("job disabled", job_id=job.id, run_id=run.id, error_code=code)
            if held and job.notify:
                await self._notify(job, run.id, "failed", job.thread_id, error=f"{code}: {message}")
            return
        await self.store.finish(run.id, self.worker, status="pending", now=now, error_code=code,
                                error=message[:2000], not_before=decision.at)  # fmt: skip

    async def _append_to_thread(self, job: Job, run_id: str, scheduled_for: float,
                                text: str) -> str | None:  # fmt: skip
        """Store a run of a tool that keeps no conversation as a turn of the job's thread."""
        conversations = self.conversations
        if conversations is None:
            return None
        when = datetime.fromtimestamp(scheduled_for, UTC).isoformat(timespec="seconds")
        messages = [{"role": "user", "content": f"[scheduled run of {job.tool} ({job.name}), "
                                                f"due {when}]"},
                    {"role": "assistant", "content": text}]  # fmt: skip
        key = {"request_id": f"job-{run_id}", "session_id": "exai-jobs", "fingerprint": job.id}
        if job.thread_id:
            try:
                await conversations.append(job.thread_id, job.owner, messages, **key)
                return job.thread_id
            except ConversationNotFoundError:
                log.warning("a job's thread is gone; starting a new one", job_id=job.id)
        thread, _ = await conversations.start_thread(
            job.owner, messages, title=f"job {job.name}"[:200], **key
        )
        thread_id: str = thread.id
        return thread_id

    # --- notifications ------------------------------------------------------

    async def _notify(self, job: Job, run_id: str, status: str, thread_id: str | None,
                      **extra: Any) -> None:  # fmt: skip
        payload = {"event": f"job_run_{status}", "job_id": job.id, "job_name": job.name,
                   "run_id": run_id, "status": status, "thread_id": thread_id,
                   "tool": job.tool, **extra}  # fmt: skip
        # The thread in the console, where its owner reads and continues it after signing in.
        base = self.core.public_url
        if thread_id and base:
            payload["thread_url"] = f"{base}/console/threads/{thread_id}"
        await self.store.add_notification(job, run_id, payload, self.clock())

    async def deliver_notifications(self) -> int:
        s = self.settings
        secret = s.jobs_webhook_secret.get_secret_value() if s.jobs_webhook_secret else None
        delivered = 0
        notes = await self.store.due_notifications(self.worker, self.clock(),
                                                   s.jobs_notify_timeout_s * 3, 20)  # fmt: skip
        for note in notes:
            # Checked again at sending, on the address the request will go to: the
            # allowed hosts, or what the name resolves to, may have changed since the
            # job was made. A refused target is not retried; the notification is kept.
            error = host_refused(note.url, s.jobs_notify_hosts)
            retry = error is None
            if error is None:
                sent = await send(self._http, note, secret, self.clock(),
                                  hosts=s.jobs_notify_hosts)  # fmt: skip
                error, retry = sent.error, sent.retry
            tries = note.attempts + 1
            later = None
            if error is not None and retry and tries < s.jobs_notify_attempts:
                later = self.clock() + notify_delay(tries)
            await self.store.notification_result(note.id, delivered=error is None,
                                                 now=self.clock(), error=error,
                                                 next_attempt_at=later)  # fmt: skip
            if error is None:
                delivered += 1
            elif later is None:
                log.warning("a job notification could not be delivered; it is kept",
                            notification_id=note.id, job_id=note.job_id, error=error)  # fmt: skip
        return delivered
