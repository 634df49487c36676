"""The job store's notification rows, in SQL both backends understand.

A mixin of :class:`~exai.jobs.sql.SqlJobStore`, kept apart because the
notifications are their own small queue: stored before they are sent, leased
to one sender, and ended delivered or undeliverable, never deleted unseen.
"""

from __future__ import annotations

import json
import uuid
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from exai.jobs.base import Job, Notification, Owner
from exai.sqldb.executor import Executor

__all__ = ["NOTE_COLUMNS", "NotificationRows", "decode_note"]

T = TypeVar("T")

NOTE_COLUMNS = (
    "id, job_id, run_id, owner, kind, url, payload, status, attempts, next_attempt_at,"
    " last_error, created_at, delivered_at"
)


def decode_note(row: Sequence[Any]) -> Notification:
    values = list(row)
    values[6] = json.loads(values[6])
    return Notification(*values)


class NotificationRows:
    @abstractmethod
    async def _write(self, body: Callable[[Executor], Awaitable[T]]) -> T: ...

    @abstractmethod
    def _q(self, template: str) -> str: ...

    @abstractmethod
    async def _job(self, tx: Executor, job_id: str, owner: Owner) -> Job: ...

    async def add_notification(
        self, job: Job, run_id: str | None, payload: dict[str, Any], now: float
    ) -> Notification:
        assert job.notify is not None
        note_id = "ntf_" + uuid.uuid4().hex[:20]
        sql = self._q(f"INSERT INTO {{p}}job_notifications ({NOTE_COLUMNS})"
                      f" VALUES ({', '.join('?' * 13)})")  # fmt: skip

        target = job.notify

        async def body(tx: Executor) -> Notification:
            await tx.execute(sql, note_id, job.id, run_id, job.owner, target["kind"],
                             target["url"], _dumps(payload), "pending", 0, now, None, now,
                             None)  # fmt: skip
            return await self._note(tx, note_id)

        return await self._write(body)

    async def _note(self, tx: Executor, note_id: str) -> Notification:
        row = await tx.fetchrow(
            self._q(f"SELECT {NOTE_COLUMNS} FROM {{p}}job_notifications WHERE id = ?"), note_id
        )
        assert row is not None
        return decode_note(row)

    async def due_notifications(
        self, worker: str, now: float, lease_s: float, limit: int
    ) -> list[Notification]:
        pick = self._q(
            f"SELECT {NOTE_COLUMNS} FROM {{p}}job_notifications WHERE status = 'pending'"
            " AND next_attempt_at <= ? AND (locked_until IS NULL OR locked_until < ?)"
            " ORDER BY next_attempt_at LIMIT ?{lock}"
        )
        lease = self._q("UPDATE {p}job_notifications SET locked_until = ? WHERE id = ?")

        async def body(tx: Executor) -> list[Notification]:
            notes = [decode_note(r) for r in await tx.fetch(pick, now, now, limit)]
            for note in notes:
                await tx.execute(lease, now + lease_s, note.id)
            return notes

        return await self._write(body)

    async def notification_result(
        self, notification_id: str, *, delivered: bool, now: float, error: str | None,
        next_attempt_at: float | None,
    ) -> Notification:  # fmt: skip
        status = "delivered" if delivered else ("pending" if next_attempt_at else "undeliverable")
        sql = self._q(
            "UPDATE {p}job_notifications SET status = ?, attempts = attempts + 1,"
            " next_attempt_at = ?, last_error = ?, delivered_at = ?, locked_until = NULL"
            " WHERE id = ?"
        )

        async def body(tx: Executor) -> Notification:
            await tx.execute(sql, status, next_attempt_at or now, error,
                             now if delivered else None, notification_id)  # fmt: skip
            return await self._note(tx, notification_id)

        return await self._write(body)

    async def notifications(self, job_id: str, owner: Owner, limit: int = 20
                            ) -> list[Notification]:  # fmt: skip
        sql = self._q(f"SELECT {NOTE_COLUMNS} FROM {{p}}job_notifications WHERE job_id = ?"
                      " ORDER BY created_at DESC LIMIT ?")  # fmt: skip

        async def body(tx: Executor) -> list[Notification]:
            await self._job(tx, job_id, owner)
            return [decode_note(r) for r in await tx.fetch(sql, job_id, limit)]

        return await self._write(body)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
