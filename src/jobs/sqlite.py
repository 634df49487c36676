"""The embedded job store: one SQLite file (``jobs.sqlite3`` beside the conversations).

One connection on one thread of its own; each transaction runs there whole,
``BEGIN IMMEDIATE`` to ``COMMIT``, so the tick's read-then-write steps never
interleave with another writer. On SQLite the one daemon is the only worker:
two daemons on one file would still be correct (the file lock serialises their
transactions) but gain nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from functools import partial
from pathlib import Path
from typing import TypeVar

from exai.jobs.schema import SQLITE_MIGRATIONS
from exai.jobs.sql import Body, SqlJobStore
from exai.sqldb.executor import Dialect, ThreadConnection, drive
from exai.sqldb.migrations import apply_sqlite_migrations
from exai.sqldb.thread import SqliteThread, prepare_file

__all__ = ["SqliteJobStore"]

T = TypeVar("T")

_connect = partial(sqlite3.connect, isolation_level=None, check_same_thread=False, timeout=10.0)


class SqliteJobStore(SqlJobStore):
    dialect = Dialect()

    def __init__(self, path: Path, thread: SqliteThread) -> None:
        self.path = path
        self._thread = thread

    @classmethod
    async def open(cls, path: str | Path) -> SqliteJobStore:
        path = Path(path)
        conn = await asyncio.to_thread(prepare_file, path, _connect)
        store = cls(path, SqliteThread(conn, "exai-jobs-sqlite"))
        try:
            await store._write(
                lambda tx: apply_sqlite_migrations(tx, "jobs_schema_version", SQLITE_MIGRATIONS)
            )
        except BaseException:
            await store.aclose()
            raise
        return store

    async def _write(self, body: Body[T]) -> T:
        return await self._thread.transaction(lambda conn: drive(body(ThreadConnection(conn))))

    async def aclose(self) -> None:
        await self._thread.close()
