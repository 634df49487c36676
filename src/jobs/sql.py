"""The job store's rules, written once in SQL both backends understand.

:class:`SqlJobStore` implements :class:`~exai.jobs.base.JobStore`; a backend
supplies one transaction at a time through :meth:`SqlJobStore._write` and its
spelling of locks and placeholders through a :class:`~exai.sqldb.executor.Dialect`.

On Postgres every row a tick takes is selected ``FOR UPDATE SKIP LOCKED``:
several daemons tick at once, each takes rows no other transaction holds, and
none waits for another. On SQLite each transaction starts ``BEGIN IMMEDIATE``,
which holds the file's one write lock, so ticks there simply take turns.
"""

from __future__ import annotations

import json
import uuid
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from exai.auth import Credential
from exai.errors import ValidationError_
from exai.jobs.base import (
    ANY_OWNER,
    Claimed,
    Job,
    JobNotFoundError,
    JobStore,
    NewJob,
    Owner,
    Planner,
    Run,
)
from exai.jobs.notes import NotificationRows
from exai.jobs.schedule import Schedule
from exai.sqldb.executor import Dialect, Executor

__all__ = ["INSERT_JOB", "JOB_COLUMNS", "SqlJobStore", "job_row"]

T = TypeVar("T")
Body = Callable[[Executor], Awaitable[T]]

JOB_COLUMNS = (
    "id, owner, name, tool, arguments, scopes, schedule_kind, schedule_spec, timezone, anchor,"
    " thread_id, max_retries, backoff_s, timeout_s, missed, notify, enabled, paused,"
    " next_run_at, created_at, updated_at, idempotency_key, disabled_reason, budget, credential,"
    " paused_reason, trace_context, models"
)
INSERT_JOB = f"INSERT INTO {{p}}jobs ({JOB_COLUMNS}) VALUES ({', '.join('?' * 28)})"
RUN_COLUMNS = (
    "id, job_id, owner, scheduled_for, status, attempt, not_before, locked_by, locked_until,"
    " started_at, finished_at, error_code, error, output, thread_id, manual, created_at"
)
_INSERT_RUN = (
    f"INSERT INTO {{p}}job_runs ({RUN_COLUMNS}) VALUES ({', '.join('?' * 17)})"
    " ON CONFLICT (job_id, scheduled_for) DO NOTHING"
)


def job_row(job_id: str, new: NewJob, next_run_at: float | None, now: float) -> tuple[Any, ...]:
    """The values of a new job's row, in :data:`JOB_COLUMNS` order."""
    s = new.schedule
    return (job_id, new.owner, new.name, new.tool, _dumps(new.arguments), _dumps(new.scopes),
            s.kind, s.spec, s.timezone, s.anchor, new.thread_id, new.max_retries,
            new.backoff_s, new.timeout_s, new.missed, _dumps(new.notify), True, False,
            next_run_at, now, now, new.idempotency_key, None, _dumps(new.budget),
            None if new.credential is None else _dumps(new.credential.public()),
            None, _dumps(new.trace_context), _dumps(new.models))  # fmt: skip


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def decode_job(row: Sequence[Any]) -> Job:
    schedule = Schedule(row[6], row[7], row[8], float(row[9]))
    credential = None if row[24] is None else Credential.from_public(json.loads(row[24]))
    return Job(
        id=row[0], owner=row[1], name=row[2], tool=row[3], arguments=json.loads(row[4]),
        scopes=None if row[5] is None else json.loads(row[5]), schedule=schedule,
        thread_id=row[10], max_retries=int(row[11]), backoff_s=float(row[12]),
        timeout_s=row[13], missed=row[14], notify=None if row[15] is None else json.loads(row[15]),
        enabled=bool(row[16]), paused=bool(row[17]), next_run_at=row[18], created_at=row[19],
        updated_at=row[20], idempotency_key=row[21], disabled_reason=row[22],
        budget=None if row[23] is None else json.loads(row[23]), credential=credential,
        paused_reason=row[25], trace_context=None if row[26] is None else json.loads(row[26]),
        models=None if row[27] is None else json.loads(row[27]),
    )  # fmt: skip


def decode_run(row: Sequence[Any]) -> Run:
    values = list(row)
    values[15] = bool(values[15])
    return Run(*values)


class SqlJobStore(NotificationRows, JobStore):
    dialect: Dialect

    @abstractmethod
    async def _write(self, body: Body[T]) -> T:
        """Run ``body`` in one write transaction."""

    def _q(self, template: str) -> str:
        return self.dialect.sql(template)

    def _owner(self, owner: Owner, args: list[Any]) -> str:
        if owner is ANY_OWNER:
            return ""
        args.append(owner)
        return " AND owner = ?"

    # --- jobs ---------------------------------------------------------------

    async def create_job(
        self, new: NewJob, next_run_at: float | None, now: float
    ) -> tuple[Job, bool]:
        job_id = "job_" + uuid.uuid4().hex[:20]
        row = job_row(job_id, new, next_run_at, now)
        insert = self._q(f"{INSERT_JOB} ON CONFLICT (owner, idempotency_key) DO NOTHING")
        by_key = self._q(
            f"SELECT {JOB_COLUMNS} FROM {{p}}jobs WHERE owner = ? AND idempotency_key = ?"
        )

        async def body(tx: Executor) -> tuple[Job, bool]:
            created = await tx.execute(insert, *row) > 0
            if new.idempotency_key is None or created:
                return await self._job(tx, job_id, ANY_OWNER), True
            found = await tx.fetchrow(by_key, new.owner, new.idempotency_key)
            assert found is not None
            job = decode_job(found)
            if (job.tool, job.arguments, job.schedule.kind, job.schedule.spec) != (
                new.tool, new.arguments, new.schedule.kind, new.schedule.spec):  # fmt: skip
                raise ValidationError_(
                    f"idempotency key {new.idempotency_key!r} already created job {job.id} "
                    "with another tool, arguments or schedule; use a new key",
                    details={"reason": "idempotency_key_reused", "id": job.id},
                )
            return job, False

        return await self._write(body)

    async def _job(self, tx: Executor, job_id: str, owner: Owner) -> Job:
        args: list[Any] = [job_id]
        where = self._owner(owner, args)
        row = await tx.fetchrow(self._q(f"SELECT {JOB_COLUMNS} FROM {{p}}jobs WHERE id = ?{where}"),
                                *args)  # fmt: skip
        if row is None:
            raise JobNotFoundError(job_id)
        return decode_job(row)

    async def get_job(self, job_id: str, owner: Owner) -> Job:
        return await self._write(lambda tx: self._job(tx, job_id, owner))

    async def list_jobs(self, owner: Owner) -> list[Job]:
        args: list[Any] = []
        where = self._owner(owner, args)
        sql = self._q(f"SELECT {JOB_COLUMNS} FROM {{p}}jobs WHERE 1 = 1{where} ORDER BY created_at")

        async def body(tx: Executor) -> list[Job]:
            return [decode_job(r) for r in await tx.fetch(sql, *args)]

        return await self._write(body)

    async def set_state(
        self, job_id: str, owner: Owner, *, paused: bool | None = None,
        enabled: bool | None = None, next_run_at: float | None = None,
        reason: str | None = None, now: float,
    ) -> Job:  # fmt: skip
        async def body(tx: Executor) -> Job:
            job = await self._job(tx, job_id, owner)
            paused_reason = (job.paused_reason if paused is None else
                             reason if paused else None)  # fmt: skip
            await tx.execute(
                self._q("UPDATE {p}jobs SET paused = ?, enabled = ?, next_run_at = ?,"
                        " disabled_reason = ?, paused_reason = ?, updated_at = ? WHERE id = ?"),
                job.paused if paused is None else paused,
                job.enabled if enabled is None else enabled, next_run_at,
                reason if enabled is False else None, paused_reason, now, job_id,
            )  # fmt: skip
            return await self._job(tx, job_id, owner)

        return await self._write(body)

    async def set_grant(
        self, job_id: str, owner: Owner, *, scopes: list[str] | None,
        budget: dict[str, Any] | None, credential: Credential | None, now: float,
        models: list[str] | None = None,
    ) -> Job:  # fmt: skip
        sql = self._q("UPDATE {p}jobs SET scopes = ?, budget = ?, credential = ?, updated_at = ?,"
                      " models = ? WHERE id = ?")  # fmt: skip

        async def body(tx: Executor) -> Job:
            await self._job(tx, job_id, owner)
            await tx.execute(sql, _dumps(scopes), _dumps(budget),
                             None if credential is None else _dumps(credential.public()), now,
                             _dumps(models), job_id)  # fmt: skip
            return await self._job(tx, job_id, owner)

        return await self._write(body)

    async def set_thread(self, job_id: str, thread_id: str, now: float) -> None:
        sql = self._q("UPDATE {p}jobs SET thread_id = ?, updated_at = ? WHERE id = ?"
                      " AND thread_id IS NULL")  # fmt: skip
        await self._write(lambda tx: tx.execute(sql, thread_id, now, job_id))

    async def delete_job(self, job_id: str, owner: Owner) -> None:
        async def body(tx: Executor) -> None:
            await self._job(tx, job_id, owner)
            for table in ("job_notifications", "job_runs"):
                await tx.execute(self._q(f"DELETE FROM {{p}}{table} WHERE job_id = ?"), job_id)
            await tx.execute(self._q("DELETE FROM {p}jobs WHERE id = ?"), job_id)

        await self._write(body)

    # --- the tick -------------------------------------------------------------

    async def reset_abandoned(self, now: float) -> int:
        # A run that has used every attempt its job allows is failed rather than
        # handed out again: a run that kills its workers must not loop forever.
        give_up = self._q(
            "UPDATE {p}job_runs SET status = 'failed', finished_at = ?, error_code = 'ABANDONED',"
            " error = 'the worker holding the run stopped and its attempts are used up',"
            " locked_by = NULL, locked_until = NULL WHERE status = 'running' AND locked_until < ?"
            " AND attempt > (SELECT max_retries FROM {p}jobs j WHERE j.id = job_id)"
        )
        reset = self._q(
            "UPDATE {p}job_runs SET status = 'pending', locked_by = NULL, locked_until = NULL,"
            " not_before = ? WHERE status = 'running' AND locked_until < ?"
        )

        async def body(tx: Executor) -> int:
            await tx.execute(give_up, now, now)
            return await tx.execute(reset, now, now)

        return await self._write(body)

    async def fire_due(self, now: float, limit: int, plan: Planner) -> int:
        due = self._q(f"SELECT {JOB_COLUMNS} FROM {{p}}jobs WHERE enabled AND NOT paused"
                      " AND next_run_at <= ? ORDER BY next_run_at LIMIT ?{lock}")  # fmt: skip
        advance = self._q("UPDATE {p}jobs SET next_run_at = ? WHERE id = ?")
        insert = self._q(_INSERT_RUN)
        broken = self._q("UPDATE {p}jobs SET enabled = ?, disabled_reason = ?,"
                         " next_run_at = NULL, updated_at = ? WHERE id = ?")  # fmt: skip

        async def body(tx: Executor) -> int:
            runs, moves, unreadable = [], [], []
            for row in await tx.fetch(due, now, limit):
                try:
                    job = decode_job(row)
                    fire = plan(job, now)
                except Exception as exc:
                    # One row that can no longer be read or planned (a time zone
                    # since removed from the system's database...) is disabled with
                    # the reason, rather than failing every tick for every job.
                    unreadable.append((False, f"its schedule cannot be evaluated: {exc}"[:500],
                                       now, row[0]))  # fmt: skip
                    continue
                if fire.scheduled_for is not None:
                    runs.append(_new_run(job, fire.scheduled_for, now, manual=False))
                moves.append((fire.next_run_at, job.id))
            if unreadable:
                await tx.executemany(broken, unreadable)
            if not moves:
                return 0
            # Whole batches, not a round trip per job: a tick's cost on Postgres is
            # mostly round trips. Conflicting fires are skipped by the insert and
            # so are not among the ids counted after it.
            if runs:
                await tx.executemany(insert, runs)
            await tx.executemany(advance, moves)
            if not runs:
                return 0
            found = await tx.fetch(self._q(
                f"SELECT COUNT(*) FROM {{p}}job_runs WHERE id IN ({_marks(len(runs))})"),
                *(r[0] for r in runs))  # fmt: skip
            return int(found[0][0])

        return await self._write(body)

    async def add_manual_run(self, job_id: str, owner: Owner, now: float) -> Run:
        async def body(tx: Executor) -> Run:
            job = await self._job(tx, job_id, owner)
            row = _new_run(job, now, now, manual=True)
            await tx.execute(self._q(_INSERT_RUN), *row)
            return await self._run(tx, row[0])

        return await self._write(body)

    async def _run(self, tx: Executor, run_id: str) -> Run:
        row = await tx.fetchrow(self._q(f"SELECT {RUN_COLUMNS} FROM {{p}}job_runs WHERE id = ?"),
                                run_id)  # fmt: skip
        if row is None:
            raise ValidationError_(f"no run {run_id!r}", details={"reason": "run_not_found"})
        return decode_run(row)

    async def get_run(self, run_id: str) -> Run:
        return await self._write(lambda tx: self._run(tx, run_id))

    async def claim(self, worker: str, now: float, lease_s: float, limit: int) -> list[Claimed]:
        pick = self._q(
            "SELECT id FROM {p}job_runs r WHERE status = 'pending' AND not_before <= ?"
            " AND EXISTS (SELECT 1 FROM {p}jobs j WHERE j.id = r.job_id AND j.enabled"
            " AND NOT j.paused) ORDER BY not_before LIMIT ?{lock}"
        )

        async def body(tx: Executor) -> list[Claimed]:
            ids = [row[0] for row in await tx.fetch(pick, now, limit)]
            if not ids:
                return []
            marks = _marks(len(ids))
            await tx.execute(self._q(
                "UPDATE {p}job_runs SET status = 'running', attempt = attempt + 1,"
                f" locked_by = ?, locked_until = ?, started_at = ? WHERE id IN ({marks})"),
                worker, now + lease_s, now, *ids)  # fmt: skip
            runs = [
                decode_run(r)
                for r in await tx.fetch(
                    self._q(f"SELECT {RUN_COLUMNS} FROM {{p}}job_runs WHERE id IN ({marks})"), *ids
                )
            ]
            job_ids = sorted({r.job_id for r in runs})
            jobs = {j.id: j for j in (decode_job(r) for r in await tx.fetch(self._q(
                f"SELECT {JOB_COLUMNS} FROM {{p}}jobs WHERE id IN ({_marks(len(job_ids))})"),
                *job_ids))}  # fmt: skip
            runs.sort(key=lambda r: (r.not_before, r.id))
            return [Claimed(run, jobs[run.job_id]) for run in runs]

        return await self._write(body)

    async def refresh_lease(self, run_id: str, worker: str, until: float) -> bool:
        sql = self._q("UPDATE {p}job_runs SET locked_until = ? WHERE id = ? AND locked_by = ?"
                      " AND status = 'running'")  # fmt: skip
        return bool(await self._write(lambda tx: tx.execute(sql, until, run_id, worker)))

    async def finish(
        self, run_id: str, worker: str, *, status: str, now: float, output: str | None = None,
        error_code: str | None = None, error: str | None = None, thread_id: str | None = None,
        not_before: float | None = None, disable_job: str | None = None,
        pause_job: str | None = None, deferred: bool = False,
    ) -> bool:  # fmt: skip
        done = status != "pending"
        end = self._q(
            "UPDATE {p}job_runs SET status = ?, attempt = attempt - ?, finished_at = ?,"
            " output = ?, error_code = ?,"
            " error = ?, thread_id = COALESCE(?, thread_id), not_before = ?, locked_by = NULL,"
            " locked_until = NULL WHERE id = ? AND locked_by = ? AND status = 'running'"
        )
        disable = self._q(
            "UPDATE {p}jobs SET enabled = ?, disabled_reason = ?, next_run_at = NULL,"
            " updated_at = ? WHERE id = (SELECT job_id FROM {p}job_runs WHERE id = ?)"
        )
        pause = self._q(
            "UPDATE {p}jobs SET paused = ?, paused_reason = ?, next_run_at = NULL,"
            " updated_at = ? WHERE id = (SELECT job_id FROM {p}job_runs WHERE id = ?)"
        )

        async def body(tx: Executor) -> bool:
            held = await tx.execute(
                end,
                status,
                int(deferred),
                now if done else None,
                output,
                error_code,
                error,
                thread_id,
                not_before or now,
                run_id,
                worker,
            )
            if held and disable_job is not None:
                await tx.execute(disable, False, disable_job, now, run_id)
            if held and pause_job is not None:
                await tx.execute(pause, True, pause_job, now, run_id)
            return bool(held)

        return await self._write(body)

    async def runs(self, job_id: str, owner: Owner, limit: int = 20) -> list[Run]:
        sql = self._q(f"SELECT {RUN_COLUMNS} FROM {{p}}job_runs WHERE job_id = ?"
                      " ORDER BY scheduled_for DESC, created_at DESC LIMIT ?")  # fmt: skip

        async def body(tx: Executor) -> list[Run]:
            await self._job(tx, job_id, owner)
            return [decode_run(r) for r in await tx.fetch(sql, job_id, limit)]

        return await self._write(body)


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _new_run(job: Job, scheduled_for: float, now: float, *, manual: bool) -> tuple[Any, ...]:
    return (uuid.uuid4().hex, job.id, job.owner, scheduled_for, "pending", 0, now, None, None,
            None, None, None, None, None, None, manual, now)  # fmt: skip
