"""The embedded job store: one SQLite file (``jobs.sqlite3`` beside the conversations).

One connection on one thread of its own; each transaction runs there whole,
``BEGIN IMMEDIATE`` to ``COMMIT``, so the tick's read-then-write steps never
interleave with another writer. On SQLite the one daemon is the only worker:
two daemons on one file would still be correct (the file lock serialises their
transactions) but gain nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from exai.jobs.schema import SQLITE_MIGRATIONS
from exai.jobs.sql import Body, SqlJobStore
from exai.store.executor import Dialect, ThreadConnection, drive
from exai.store.migrations import apply_sqlite_migrations

__all__ = ["SqliteJobStore"]

T = TypeVar("T")


class SqliteJobStore(SqlJobStore):
    dialect = Dialect()

    def __init__(self, path: Path, conn: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self.path = path
        self._conn = conn
        self._pool = pool

    @classmethod
    async def open(cls, path: str | Path) -> SqliteJobStore:
        path = Path(path)
        pool = ThreadPoolExecutor(1, thread_name_prefix="exai-jobs-sqlite")
        loop = asyncio.get_running_loop()

        def connect() -> sqlite3.Connection:
            where = path.expanduser()
            where.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(where), isolation_level=None, check_same_thread=False,
                                   timeout=10.0)  # fmt: skip
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
                conn.execute(f"PRAGMA {pragma}")
            return conn

        conn = await loop.run_in_executor(pool, connect)
        store = cls(path, conn, pool)
        await store._write(
            lambda tx: apply_sqlite_migrations(tx, "jobs_schema_version", SQLITE_MIGRATIONS)
        )
        return store

    async def _write(self, body: Body[T]) -> T:
        context = contextvars.copy_context()
        conn = self._conn

        def transaction() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = context.run(drive, body(ThreadConnection(conn)))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        return await asyncio.get_running_loop().run_in_executor(self._pool, transaction)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self._conn.close)
        self._pool.shutdown(wait=False)
