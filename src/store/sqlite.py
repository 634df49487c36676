"""The embedded conversation store: one SQLite file in WAL mode.

Two connections, each on a thread of its own (:class:`~exai.sqldb.thread.SqliteThread`):
a writer and a reader, which in WAL mode sees committed data without waiting for
the writer. Every operation runs as one function on its connection's thread,
transaction and all (see :meth:`SqliteStore._run`): one hop between the event loop
and the thread per operation rather than one per statement, which is what made
writes queue up when many calls finished at once. The writer's thread runs one
transaction at a time, so writers within the process are serialized by its
queue; ``BEGIN IMMEDIATE`` serializes them against other processes such as
``exai conversations prune``. Reads run inside a transaction too, so the
statements of one read see one snapshot. ``synchronous=NORMAL`` makes a commit
durable against a crash of the process (not of the machine) without an fsync
per turn.

The schema is versioned: :data:`MIGRATIONS` lists scripts in order, and the
``schema_version`` table records which ones ran, so opening a store applies only
what is missing, under the same write lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from exai.sqldb.executor import Dialect, ThreadConnection, drive
from exai.sqldb.migrations import apply_sqlite_migrations
from exai.sqldb.thread import PRAGMAS, SqliteThread, prepare_file
from exai.store.base import StoreLimits
from exai.store.call_log import SQLITE_TABLES as SQLITE_CALL_LOG
from exai.store.keys import SQLITE_TABLES as SQLITE_KEYS
from exai.store.limits import SQLITE_TABLES as SQLITE_LIMITS
from exai.store.reasoning import SQLITE_TABLE as SQLITE_REASONING
from exai.store.responses import SQLITE_MIGRATION as SQLITE_RESPONSES
from exai.store.sessions import SQLITE_TABLES as SQLITE_SESSIONS
from exai.store.sign_ins import SQLITE_TABLE as SQLITE_SIGN_INS
from exai.store.sql import Body, SqlStore, T
from exai.store.usage import SQLITE_TABLES as SQLITE_USAGE

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
    (
        # The turn each request stored, found again by the request's key: a
        # request_id is unique within its session only. Turns stored before this
        # table existed have no key, so a retry of one of them is stored anew.
        2,
        """
        CREATE TABLE request_turns (
            owner TEXT NOT NULL,
            session_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            PRIMARY KEY (owner, session_id, request_id)
        ) WITHOUT ROWID;
        CREATE INDEX request_turns_thread ON request_turns(thread_id);
        DROP INDEX messages_request;
        """,
    ),
    (
        # One row per provider call, for spend per principal, tool, thread and model
        # and for budgets (see exai.store.costs). No reference to threads: spend
        # outlives the conversations it was spent on. The report scans a period
        # (call_costs_at); a budget sums one principal's period (call_costs_principal).
        3,
        """
        CREATE TABLE call_costs (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            instance_id TEXT NOT NULL,
            principal TEXT NOT NULL,
            tool TEXT NOT NULL,
            session_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            thread_id TEXT,
            model TEXT NOT NULL,
            provider TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            cached_prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL,
            currency TEXT,
            cost_input INTEGER NOT NULL,
            cost_cached_input INTEGER NOT NULL,
            cost_output INTEGER NOT NULL,
            cost_total INTEGER NOT NULL
        );
        CREATE INDEX call_costs_at ON call_costs(at);
        CREATE INDEX call_costs_principal ON call_costs(principal, currency, at);
        """,
    ),
    (
        # Documents a vendor extracted, by (owner, provider, content hash): a file
        # is uploaded once per principal, and its text is sent again from here.
        # Keyed by owner so that no principal reuses another's upload.
        4,
        """
        CREATE TABLE vendor_uploads (
            owner TEXT NOT NULL,
            provider TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            file_id TEXT NOT NULL,
            content TEXT NOT NULL,
            size INTEGER NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (owner, provider, sha256)
        ) WITHOUT ROWID;
        """,
    ),
    (
        # Version 5 holds what several daemons share (sessions, finished results,
        # rate windows); a SQLite store serves one daemon, which keeps them in
        # memory, so here the version has no statements and only keeps both
        # backends' numbering equal.
        5,
        "",
    ),
    (
        # What each turn of a thread cost (the console's thread page): a thread's cost
        # rows, without walking every row of its principal.
        6,
        """
        CREATE INDEX call_costs_thread ON call_costs(thread_id, principal, currency)
            WHERE thread_id IS NOT NULL;
        """,
    ),
    (7, SQLITE_RESPONSES),  # the Responses API's stored responses (exai.store.responses)
    # The trace of each model call, when tracing was on: the console links a turn to it.
    (8, "ALTER TABLE call_costs ADD COLUMN trace_id TEXT;"),
    # The reasoning of callers' tool rounds and the console's sign-ins, kept past a
    # restart (exai.store.reasoning, exai.store.sign_ins).
    (9, SQLITE_REASONING + SQLITE_SIGN_INS),
    # Agent sessions as threads: their origin, and the heads requests continue from
    # (exai.store.sessions); a turn's cost found by its request key alone.
    (10, SQLITE_SESSIONS),
    # The operator's keys and revoked JWT ids, and the marker daemons poll (exai.store.keys).
    (11, SQLITE_KEYS),
    # The request log: one row per call (exai.store.call_log).
    (12, SQLITE_CALL_LOG),
    # Per-principal limits set at run time, and the budget alerts sent (exai.store.limits).
    (13, SQLITE_LIMITS),
    # Calls, tokens and cost per UTC day, principal, key, face and model, summed with the
    # request log's rows (exai.store.usage).
    (14, SQLITE_USAGE),
]

_PRAGMAS = (*PRAGMAS, "cache_size=-32000", "temp_store=MEMORY")
_connect = partial(sqlite3.connect, isolation_level=None, check_same_thread=False, timeout=10.0)


def _open(path: Path) -> sqlite3.Connection:
    conn: sqlite3.Connection = prepare_file(path, _connect, _PRAGMAS)
    return conn


class SqliteStore(SqlStore):
    """The conversation store in one SQLite file. Create with :meth:`open`."""

    dialect = Dialect()

    def __init__(
        self,
        path: Path,
        limits: StoreLimits,
        writer: SqliteThread,
        reader: SqliteThread,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(limits, clock)
        self.path = path
        self._writer = writer
        self._reader = reader

    @classmethod
    async def open(
        cls,
        path: str | Path,
        limits: StoreLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SqliteStore:
        """Open (creating if needed) the store at ``path`` and bring its schema up to date."""
        path = await asyncio.to_thread(Path(path).expanduser)
        writer = SqliteThread(await asyncio.to_thread(_open, path), "exai-store-writer")
        try:
            reader = SqliteThread(await asyncio.to_thread(_open, path), "exai-store-reader")
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
        return await self._write(
            lambda tx: apply_sqlite_migrations(tx, "schema_version", MIGRATIONS)
        )

    async def schema_version(self) -> int:
        sql = "SELECT COALESCE(MAX(version), 0) FROM schema_version"
        row = await self._read(lambda db: db.fetchrow(sql))
        return int(row[0]) if row else 0

    async def _read(self, body: Body[T]) -> T:
        return await self._run(self._reader, "BEGIN", body)

    async def _write(self, body: Body[T]) -> T:
        return await self._run(self._writer, "BEGIN IMMEDIATE", body)

    async def _run(self, thread: SqliteThread, begin: str, body: Body[T]) -> T:
        """Run ``body`` in one transaction, as one function on ``thread`` (its
        statements never suspend, so :func:`~exai.sqldb.executor.drive` runs it whole)."""
        return await thread.transaction(lambda conn: drive(body(ThreadConnection(conn))), begin)

    async def aclose(self) -> None:
        for conn in (self._reader, self._writer):
            await conn.close()
