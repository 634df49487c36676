"""The shared conversation store: Postgres through an asyncpg connection pool.

Several daemons point at one database (a Supabase project's works) so that a
``continuation_id`` is valid on any of them. The tables live in their own schema
(``exai`` unless told otherwise), out of the way of an application's tables and of
Supabase's REST API, which exposes ``public`` only.

Migrations run in one transaction that first takes a transaction-scoped advisory
lock, so two daemons starting at once apply each script exactly once; a
transaction-scoped lock also works through Supabase's transaction pooler, where a
session-level lock could be released on another backend.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from exai.sqldb.executor import Dialect
from exai.sqldb.migrations import apply_migrations
from exai.sqldb.postgres import PgConnection, check_schema_name, driver_options
from exai.store.base import StoreLimits
from exai.store.call_log import POSTGRES_TABLES as POSTGRES_CALL_LOG
from exai.store.keys import POSTGRES_TABLES as POSTGRES_KEYS
from exai.store.limits import POSTGRES_TABLES as POSTGRES_LIMITS
from exai.store.reasoning import POSTGRES_TABLE as POSTGRES_REASONING
from exai.store.responses import POSTGRES_MIGRATION as POSTGRES_RESPONSES
from exai.store.sessions import POSTGRES_TABLES as POSTGRES_SESSIONS
from exai.store.sign_ins import POSTGRES_TABLE as POSTGRES_SIGN_INS
from exai.store.sql import Body, SqlStore, T
from exai.store.usage import POSTGRES_TABLES as POSTGRES_USAGE

__all__ = [
    "MIGRATIONS",
    "PostgresStore",
]

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE {s}.threads (
            id text PRIMARY KEY,
            owner text NOT NULL,
            title text,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            parent_id text REFERENCES {s}.threads(id) ON DELETE SET NULL,
            fork_point bigint,
            depth integer NOT NULL DEFAULT 0,
            deleted_at double precision,
            turns integer NOT NULL DEFAULT 0,
            last_seq bigint NOT NULL DEFAULT 0,
            total_chars bigint NOT NULL DEFAULT 0
        );
        CREATE INDEX threads_owner_updated ON {s}.threads(owner, updated_at);
        CREATE INDEX threads_updated ON {s}.threads(updated_at);
        CREATE INDEX threads_parent ON {s}.threads(parent_id) WHERE parent_id IS NOT NULL;
        CREATE INDEX threads_deleted ON {s}.threads(deleted_at) WHERE deleted_at IS NOT NULL;

        CREATE TABLE {s}.messages (
            thread_id text NOT NULL REFERENCES {s}.threads(id) ON DELETE CASCADE,
            seq bigint NOT NULL,
            turn integer NOT NULL,
            role text NOT NULL,
            content text,
            request_id text NOT NULL,
            created_at double precision NOT NULL,
            fields jsonb,
            reasoning text,
            model text,
            provider text,
            usage jsonb,
            files jsonb,
            chars bigint NOT NULL,
            turn_chars_before bigint NOT NULL,
            tokens_kimi bigint NOT NULL,
            tokens_glm bigint NOT NULL,
            tokens_generic bigint NOT NULL,
            PRIMARY KEY (thread_id, seq)
        );
        CREATE INDEX messages_request ON {s}.messages(thread_id, request_id, seq);
        CREATE INDEX messages_budget ON {s}.messages(thread_id, turn_chars_before, seq);

        CREATE TABLE {s}.thread_files (
            thread_id text NOT NULL REFERENCES {s}.threads(id) ON DELETE CASCADE,
            path text NOT NULL,
            last_seq bigint NOT NULL,
            PRIMARY KEY (thread_id, path)
        );

        CREATE TABLE {s}.thread_state (
            thread_id text NOT NULL REFERENCES {s}.threads(id) ON DELETE CASCADE,
            key text NOT NULL,
            value jsonb NOT NULL,
            updated_at double precision NOT NULL,
            PRIMARY KEY (thread_id, key)
        );

        CREATE TABLE {s}.artifacts (
            id text PRIMARY KEY,
            thread_id text NOT NULL REFERENCES {s}.threads(id) ON DELETE CASCADE,
            content text NOT NULL,
            meta jsonb NOT NULL,
            size bigint NOT NULL,
            created_at double precision NOT NULL
        );
        CREATE INDEX artifacts_thread ON {s}.artifacts(thread_id);
        """,
    ),
    (
        # The turn each request stored, found again by the request's key: a
        # request_id is unique within its session only. Turns stored before this
        # table existed have no key, so a retry of one of them is stored anew.
        2,
        """
        CREATE TABLE {s}.request_turns (
            owner text NOT NULL,
            session_id text NOT NULL,
            request_id text NOT NULL,
            fingerprint text NOT NULL,
            thread_id text NOT NULL REFERENCES {s}.threads(id) ON DELETE CASCADE,
            first_seq bigint NOT NULL,
            last_seq bigint NOT NULL,
            PRIMARY KEY (owner, session_id, request_id)
        );
        CREATE INDEX request_turns_thread ON {s}.request_turns(thread_id);
        DROP INDEX {s}.messages_request;
        """,
    ),
    (
        # One row per provider call, for spend per principal, tool, thread and model
        # and for budgets (see exai.store.costs). No reference to threads: spend
        # outlives the conversations it was spent on. Amounts are integer nanos.
        3,
        """
        CREATE TABLE {s}.call_costs (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at double precision NOT NULL,
            instance_id text NOT NULL,
            principal text NOT NULL,
            tool text NOT NULL,
            session_id text NOT NULL,
            request_id text NOT NULL,
            thread_id text,
            model text NOT NULL,
            provider text NOT NULL,
            prompt_tokens bigint NOT NULL,
            cached_prompt_tokens bigint NOT NULL,
            completion_tokens bigint NOT NULL,
            reasoning_tokens bigint NOT NULL,
            currency text,
            cost_input bigint NOT NULL,
            cost_cached_input bigint NOT NULL,
            cost_output bigint NOT NULL,
            cost_total bigint NOT NULL
        );
        CREATE INDEX call_costs_at ON {s}.call_costs(at);
        CREATE INDEX call_costs_principal ON {s}.call_costs(principal, currency, at);
        """,
    ),
    (
        # Documents a vendor extracted, by (owner, provider, content hash): a file
        # is uploaded once per principal, and its text is sent again from here.
        # Keyed by owner so that no principal reuses another's upload.
        4,
        """
        CREATE TABLE {s}.vendor_uploads (
            owner text NOT NULL,
            provider text NOT NULL,
            sha256 text NOT NULL,
            file_id text NOT NULL,
            content text NOT NULL,
            size bigint NOT NULL,
            created_at double precision NOT NULL,
            PRIMARY KEY (owner, provider, sha256)
        );
        """,
    ),
    (
        # What several daemons share beyond conversations (see exai.cluster): which
        # principal a session belongs to, finished calls' results for a retry that
        # lands on another daemon, and each principal's calls per rate window.
        5,
        """
        CREATE TABLE {s}.sessions (
            id text PRIMARY KEY,
            owner text NOT NULL,
            created_at double precision NOT NULL,
            last_seen double precision NOT NULL
        );
        CREATE INDEX sessions_last_seen ON {s}.sessions(last_seen);

        CREATE TABLE {s}.call_results (
            session_id text NOT NULL,
            request_id text NOT NULL,
            owner text NOT NULL,
            fingerprint text NOT NULL,
            result bytea NOT NULL,
            stored_at double precision NOT NULL,
            PRIMARY KEY (session_id, request_id)
        );
        CREATE INDEX call_results_stored ON {s}.call_results(stored_at);

        CREATE TABLE {s}.rate_windows (
            principal text NOT NULL,
            window_start bigint NOT NULL,
            calls bigint NOT NULL,
            PRIMARY KEY (principal, window_start)
        );
        """,
    ),
    (
        # What each turn of a thread cost (the console's thread page): a thread's cost
        # rows, without walking every row of its principal.
        6,
        """
        CREATE INDEX call_costs_thread ON {s}.call_costs(thread_id, principal, currency)
            WHERE thread_id IS NOT NULL;
        """,
    ),
    (7, POSTGRES_RESPONSES),  # the Responses API's stored responses (exai.store.responses)
    # The trace of each model call, when tracing was on: the console links a turn to it.
    (8, "ALTER TABLE {s}.call_costs ADD COLUMN trace_id text;"),
    # The reasoning of callers' tool rounds and the console's sign-ins, shared by every
    # daemon on this database (exai.store.reasoning, exai.store.sign_ins).
    (9, POSTGRES_REASONING + POSTGRES_SIGN_INS),
    # Agent sessions as threads: their origin, and the heads requests continue from
    # (exai.store.sessions); a turn's cost found by its request key alone.
    (10, POSTGRES_SESSIONS),
    # The operator's keys and revoked JWT ids, and the marker daemons poll (exai.store.keys).
    (11, POSTGRES_KEYS),
    # The request log: one row per call (exai.store.call_log).
    (12, POSTGRES_CALL_LOG),
    # Per-principal limits set at run time, and the budget alerts sent (exai.store.limits).
    (13, POSTGRES_LIMITS),
    # Calls, tokens and cost per UTC day, principal, key, face and model, summed with the
    # request log's rows (exai.store.usage).
    (14, POSTGRES_USAGE),
]

# Workflow steps holding their thread's lock at once, per daemon; more wait.
_LOCK_CONNECTIONS = 16


class PostgresStore(SqlStore):
    """The conversation store in a Postgres schema. Create with :meth:`open`."""

    shared = True

    def __init__(
        self,
        pool: asyncpg.Pool,
        limits: StoreLimits,
        schema: str = "exai",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(limits, clock)
        check_schema_name(schema)
        self.schema = schema
        self.dialect = Dialect(prefix=f"{schema}.", numbered_params=True, lock_row=" FOR UPDATE")
        self._pool = pool
        self._connect: tuple[str, dict[str, Any]] | None = None
        self._lock_pool: asyncpg.Pool | None = None
        self._lock_pool_ready = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        url: str,
        limits: StoreLimits | None = None,
        *,
        schema: str = "exai",
        min_size: int = 1,
        max_size: int = 10,
        clock: Callable[[], float] = time.time,
    ) -> PostgresStore:
        """Connect a pool to ``url`` and bring the schema up to date."""
        check_schema_name(schema)
        dsn, options = driver_options(url)
        pool = await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size,
                                         command_timeout=60, **options)  # fmt: skip
        store = cls(pool, limits or StoreLimits(), schema, clock)
        store._connect = (dsn, options)
        try:
            await store.migrate()
        except BaseException:
            await store.aclose()
            raise
        return store

    async def migrate(self) -> int:
        """Apply the missing migrations under the advisory lock; returns the version."""
        async with self._pool.acquire() as conn, conn.transaction():
            return await apply_migrations(conn, self.schema, "store", "schema_version",
                                          MIGRATIONS)  # fmt: skip

    async def schema_version(self) -> int:
        async with self._pool.acquire() as conn:
            value = await conn.fetchval(
                f"SELECT COALESCE(MAX(version), 0) FROM {self.schema}.schema_version"
            )
        return int(value)

    async def _read(self, body: Body[T]) -> T:
        async with self._pool.acquire() as conn:
            return await body(PgConnection(conn))

    async def _write(self, body: Body[T]) -> T:
        async with self._pool.acquire() as conn, conn.transaction():
            return await body(PgConnection(conn))

    @property
    def pool(self) -> asyncpg.Pool:
        """The connection pool, for what several daemons share beside conversations."""
        return self._pool

    @asynccontextmanager
    async def advisory_lock(self, name: str) -> AsyncIterator[None]:
        """Hold a lock named ``name`` across every daemon on this database.

        A transaction-scoped advisory lock, held by a transaction left open for
        the body: it works through Supabase's transaction pooler (the transaction
        stays on one backend), and a daemon that dies releases it with its
        connection.
        """
        digest = hashlib.sha256(f"exai.lock:{self.schema}:{name}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        pool = await self._locks()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", key)
            yield

    async def _locks(self) -> asyncpg.Pool:
        """The pool that holds locks: apart from the store's, because a lock's holder
        goes on to use the store, and with both on one pool enough holders would
        leave none of its connections for that."""
        if self._connect is None:
            return self._pool
        async with self._lock_pool_ready:
            if self._lock_pool is None:
                dsn, options = self._connect
                self._lock_pool = await asyncpg.create_pool(
                    dsn, min_size=0, max_size=_LOCK_CONNECTIONS, **options
                )
        return self._lock_pool

    async def aclose(self) -> None:
        if self._lock_pool is not None and not self._lock_pool.is_closing():
            await self._lock_pool.close()
        if not self._pool.is_closing():
            await self._pool.close()
