"""The shared job store: Postgres, for several daemons ticking against one database.

The tables live in the conversation store's schema (``exai``) with a
migrations table of their own (``jobs_schema_version``). Migrations take an
advisory lock, so daemons may start together. Each daemon's tick takes rows
``FOR UPDATE SKIP LOCKED`` (see :mod:`exai.jobs.sql`), so a due job is fired by
one of them and a pending run is claimed by one of them.
"""

from __future__ import annotations

from typing import TypeVar

import asyncpg

from exai.jobs.schema import POSTGRES_MIGRATIONS
from exai.jobs.sql import Body, SqlJobStore
from exai.sqldb.executor import Dialect
from exai.sqldb.migrations import apply_migrations
from exai.sqldb.postgres import PgConnection, check_schema_name, driver_options

__all__ = ["PostgresJobStore"]

T = TypeVar("T")


class PostgresJobStore(SqlJobStore):
    def __init__(self, pool: asyncpg.Pool, schema: str) -> None:
        self._pool = pool
        self.schema = schema
        self.dialect = Dialect(
            prefix=f"{schema}.", numbered_params=True, skip_locked=" FOR UPDATE SKIP LOCKED"
        )

    @classmethod
    async def open(cls, url: str, *, schema: str = "exai", max_size: int = 5) -> PostgresJobStore:
        check_schema_name(schema)
        dsn, options = driver_options(url)
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=max_size, command_timeout=60,
                                         **options)  # fmt: skip
        store = cls(pool, schema)
        try:
            await store._migrate()
        except BaseException:
            await store.aclose()
            raise
        return store

    async def _migrate(self) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await apply_migrations(conn, self.schema, "jobs", "jobs_schema_version",
                                   POSTGRES_MIGRATIONS)  # fmt: skip

    async def _write(self, body: Body[T]) -> T:
        async with self._pool.acquire() as conn, conn.transaction():
            return await body(PgConnection(conn))

    async def aclose(self) -> None:
        if not self._pool.is_closing():
            await self._pool.close()
