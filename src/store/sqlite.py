"""The embedded conversation store: one SQLite file in WAL mode, through aiosqlite.

Two connections, each with its own worker thread: a writer, used by one
transaction at a time (an ``asyncio.Lock`` within the process, ``BEGIN
IMMEDIATE`` against other processes such as ``exai conversations prune``), and a
reader, which in WAL mode sees committed data without waiting for the writer.
``synchronous=NORMAL`` makes a commit durable against a crash of the process
(not of the machine) without an fsync per turn.

The schema is versioned: :data:`MIGRATIONS` lists scripts in order, and the
``schema_version`` table records which ones ran, so opening a store applies only
what is missing, under the same write lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from exai.store.base import StoreLimits
from exai.store.executor import Dialect, Executor
from exai.store.sql import SqlStore

__all__ = ["MIGRATIONS", "SqliteStore"]

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE threads (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            title TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            parent_id TEXT REFERENCES threads(id) ON DELETE SET NULL,
            fork_point INTEGER,
            depth INTEGER NOT NULL DEFAULT 0,
            deleted_at REAL,
            turns INTEGER NOT NULL DEFAULT 0,
            last_seq INTEGER NOT NULL DEFAULT 0,
            total_chars INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX threads_owner_updated ON threads(owner, updated_at);
        CREATE INDEX threads_updated ON threads(updated_at);
        CREATE INDEX threads_parent ON threads(parent_id) WHERE parent_id IS NOT NULL;
        CREATE INDEX threads_deleted ON threads(deleted_at) WHERE deleted_at IS NOT NULL;

        CREATE TABLE messages (
            thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT,
            request_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            fields TEXT,
            reasoning TEXT,
            model TEXT,
            provider TEXT,
            usage TEXT,
            files TEXT,
            chars INTEGER NOT NULL,
            turn_chars_before INTEGER NOT NULL,
            tokens_kimi INTEGER NOT NULL,
            tokens_glm INTEGER NOT NULL,
            tokens_generic INTEGER NOT NULL,
            PRIMARY KEY (thread_id, seq)
        );
        CREATE INDEX messages_request ON messages(thread_id, request_id, seq);
        CREATE INDEX messages_budget ON messages(thread_id, turn_chars_before, seq);

        CREATE TABLE thread_files (
            thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            last_seq INTEGER NOT NULL,
            PRIMARY KEY (thread_id, path)
        ) WITHOUT ROWID;

        CREATE TABLE thread_state (
            thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (thread_id, key)
        );

        CREATE TABLE artifacts (
            id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
            content TEXT NOT NULL,
            meta TEXT NOT NULL,
            size INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX artifacts_thread ON artifacts(thread_id);
        """,
    ),
]

_BUSY_TIMEOUT_S = 10.0
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA cache_size=-32000",
    "PRAGMA temp_store=MEMORY",
)


class _Connection:
    """:class:`~exai.store.sql.Executor` over one aiosqlite connection."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def fetch(self, sql: str, *args: Any) -> Sequence[Sequence[Any]]:
        return list(await self._conn.execute_fetchall(sql, args))

    async def fetchrow(self, sql: str, *args: Any) -> Sequence[Any] | None:
        rows = list(await self._conn.execute_fetchall(sql, args))
        return rows[0] if rows else None

    async def execute(self, sql: str, *args: Any) -> int:
        cursor = await self._conn.execute(sql, args)
        return max(cursor.rowcount, 0)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)


class SqliteStore(SqlStore):
    """The conversation store in one SQLite file. Create with :meth:`open`."""

    dialect = Dialect()

    def __init__(
        self,
        path: Path,
        limits: StoreLimits,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(limits, clock)
        self.path = path
        self._writer = _Connection(writer)
        self._reader = _Connection(reader)
        self._writer_conn = writer
        self._reader_conn = reader
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        path: str | Path,
        limits: StoreLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SqliteStore:
        """Open (creating if needed) the store at ``path`` and bring its schema up to date."""
        path = await asyncio.to_thread(_prepare, Path(path))
        writer = await _connect(path)
        try:
            reader = await _connect(path)
        except BaseException:
            await writer.close()
            raise
        store = cls(path, limits or StoreLimits(), writer, reader, clock)
        try:
            await store.migrate()
        except BaseException:
            await store.aclose()
            raise
        return store

    async def migrate(self) -> int:
        """Apply the missing migrations; returns the schema version."""
        async with self._write() as tx:
            await tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_version"
                " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
            )
            row = await tx.fetchrow("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            current = int(row[0]) if row else 0
            for version, script in MIGRATIONS:
                if version <= current:
                    continue
                for statement in _statements(script):
                    await tx.execute(statement)
                await tx.execute("INSERT INTO schema_version VALUES (?, ?)", version, time.time())
                current = version
        return current

    async def schema_version(self) -> int:
        async with self._read() as db:
            row = await db.fetchrow("SELECT COALESCE(MAX(version), 0) FROM schema_version")
        return int(row[0]) if row else 0

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[Executor]:
        yield self._reader

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Executor]:
        async with self._write_lock:
            try:
                await self._writer_conn.execute("BEGIN IMMEDIATE")
                yield self._writer
                await self._writer_conn.commit()
            except BaseException:
                # Queued behind anything the cancelled call left in the worker's
                # queue (even its BEGIN), so the next writer starts clean.
                await asyncio.shield(self._writer_conn.rollback())
                raise

    async def aclose(self) -> None:
        for conn in (self._reader_conn, self._writer_conn):
            await conn.close()


def _prepare(path: Path) -> Path:
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


async def _connect(path: Path) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(str(path), isolation_level=None, timeout=_BUSY_TIMEOUT_S)
    try:
        for pragma in _PRAGMAS:
            await _retry_busy(conn, pragma)
    except BaseException:
        await conn.close()
        raise
    return conn


async def _retry_busy(conn: aiosqlite.Connection, statement: str) -> None:
    """Run ``statement``, retrying while another connection holds the file.

    Switching a new file to WAL can fail with "database is locked" without SQLite
    calling its busy handler, when two processes open the file at the same moment.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            await conn.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (no ``;`` inside our literals)."""
    return [part.strip() for part in script.split(";") if part.strip()]
