"""The extraction queue: user messages waiting for the extraction worker, durably.

Kept in the memory store's database (table ``memory_extraction_queue``), so
that what was queued survives a restart. A job is taken under a lease: a
worker that dies mid-job leaves it to be taken again when the lease ends. A
failed job is kept for another attempt until its attempts reach the limit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["ExtractionJob", "ExtractionQueue", "PostgresExtractionQueue", "SqliteExtractionQueue"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ExtractionJob:
    """A user message waiting for the extraction worker."""

    id: int
    owner: str
    text: str
    thread_id: str | None
    project: str | None
    attempts: int


class ExtractionQueue(ABC):
    @abstractmethod
    async def enqueue(
        self, owner: str, text: str, thread_id: str | None, project: str | None
    ) -> int: ...

    @abstractmethod
    async def claim(self, lease_s: float) -> ExtractionJob | None:
        """The oldest job not leased by a live worker, leased for ``lease_s`` seconds."""

    @abstractmethod
    async def finish(self, job_id: int, error: str | None, max_attempts: int) -> None:
        """Done: removed. Failed: kept for another attempt until ``max_attempts``."""

    @abstractmethod
    async def pending(self) -> int: ...


class SqliteExtractionQueue(ExtractionQueue):
    """The queue on the SQLite memory store's connection (``run`` is its transaction)."""

    def __init__(
        self, run: Callable[[Callable[[Any], Any]], Awaitable[Any]], clock: Callable[[], float]
    ) -> None:
        self._run = run
        self._clock = clock

    async def enqueue(
        self, owner: str, text: str, thread_id: str | None, project: str | None
    ) -> int:
        sql = (
            "INSERT INTO memory_extraction_queue (owner, text, thread_id, project, created_at)"
            " VALUES (?, ?, ?, ?, ?)"
        )
        return await self._run(
            lambda db: int(
                db.execute(sql, (owner, text, thread_id, project, self._clock())).lastrowid
            )
        )

    async def claim(self, lease_s: float) -> ExtractionJob | None:
        def body(db: Any) -> ExtractionJob | None:
            now = self._clock()
            row = db.execute(
                "SELECT id, owner, text, thread_id, project, attempts FROM memory_extraction_queue"
                " WHERE leased_until <= ? ORDER BY id LIMIT 1",
                (now,),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE memory_extraction_queue SET leased_until = ?, attempts = attempts + 1"
                " WHERE id = ?",
                (now + lease_s, row[0]),
            )
            return ExtractionJob(row[0], row[1], row[2], row[3], row[4], row[5] + 1)

        return await self._run(body)

    async def finish(self, job_id: int, error: str | None, max_attempts: int) -> None:
        def body(db: Any) -> None:
            if error is None:
                db.execute("DELETE FROM memory_extraction_queue WHERE id = ?", (job_id,))
                return
            db.execute(
                "DELETE FROM memory_extraction_queue WHERE id = ? AND attempts >= ?",
                (job_id, max_attempts),
            )
            db.execute(
                "UPDATE memory_extraction_queue SET last_error = ?, leased_until = 0 WHERE id = ?",
                (error[:2000], job_id),
            )

        await self._run(body)

    async def pending(self) -> int:
        sql = "SELECT count(*) FROM memory_extraction_queue"
        return await self._run(lambda db: int(db.execute(sql).fetchone()[0]))


class PostgresExtractionQueue(ExtractionQueue):
    """The queue in the Postgres memory store's schema."""

    def __init__(self, pool: Any, schema: str, clock: Callable[[], float]) -> None:
        self._pool = pool
        self.schema = schema
        self._clock = clock

    async def enqueue(
        self, owner: str, text: str, thread_id: str | None, project: str | None
    ) -> int:
        async with self._pool.acquire() as conn:
            return int(await conn.fetchval(
                f"INSERT INTO {self.schema}.memory_extraction_queue"
                " (owner, text, thread_id, project, created_at) VALUES ($1, $2, $3, $4, $5)"
                " RETURNING id", owner, text, thread_id, project, self._clock()))  # fmt: skip

    async def claim(self, lease_s: float) -> ExtractionJob | None:
        now = self._clock()
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                f"UPDATE {self.schema}.memory_extraction_queue SET leased_until = $2,"
                " attempts = attempts + 1 WHERE id = (SELECT id FROM"
                f" {self.schema}.memory_extraction_queue WHERE leased_until <= $1 ORDER BY id"
                " LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING id, owner, text, thread_id, project, attempts",
                now, now + lease_s,
            )  # fmt: skip
        return ExtractionJob(*row) if row else None

    async def finish(self, job_id: int, error: str | None, max_attempts: int) -> None:
        q = f"{self.schema}.memory_extraction_queue"
        async with self._pool.acquire() as conn:
            if error is None:
                await conn.execute(f"DELETE FROM {q} WHERE id = $1", job_id)
                return
            await conn.execute(f"DELETE FROM {q} WHERE id = $1 AND attempts >= $2",
                               job_id, max_attempts)  # fmt: skip
            await conn.execute(f"UPDATE {q} SET last_error = $2, leased_until = 0 WHERE id = $1",
                               job_id, error[:2000])  # fmt: skip

    async def pending(self) -> int:
        async with self._pool.acquire() as conn:
            return int(await conn.fetchval(
                f"SELECT count(*) FROM {self.schema}.memory_extraction_queue"))  # fmt: skip
