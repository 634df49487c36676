"""What every room on Postgres shares: the URL's options for asyncpg, a safe schema
name, and :class:`~exai.sqldb.executor.Executor` over one asyncpg connection."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from exai.errors import ValidationError_

__all__ = ["PgConnection", "check_schema_name", "driver_options"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# Query parameters some tools add to connection strings that asyncpg would
# otherwise send to the server as settings, which the server rejects.
_CLIENT_ONLY = {"pgbouncer", "connection_limit", "pool_timeout", "schema"}


def driver_options(url: str) -> tuple[str, dict[str, Any]]:
    """The DSN to give asyncpg and the pool options the URL implies.

    ``sslmode`` and the other libpq parameters stay in the DSN (asyncpg reads
    them). A transaction pooler cannot keep prepared statements between
    transactions, so behind one (``pgbouncer=true``, or Supabase's pooler port
    6543) the statement cache is off.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    flags = {k.lower(): v for k, v in query if k.lower() in _CLIENT_ONLY}
    kept = [(k, v) for k, v in query if k.lower() not in _CLIENT_ONLY]
    scheme = "postgresql" if parts.scheme == "postgres" else parts.scheme
    dsn = urlunsplit((scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    pooled = flags.get("pgbouncer", "").lower() in ("1", "true", "yes") or parts.port == 6543
    return dsn, {"statement_cache_size": 0} if pooled else {}


def check_schema_name(schema: str) -> str:
    """``schema`` if it is a plain lower-case name, safe to write into SQL; else refused."""
    if not _SCHEMA_NAME.match(schema):
        raise ValidationError_(f"{schema!r} is not a plain lower-case Postgres schema name")
    return schema


def _status_count(status: str) -> int:
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class PgConnection:
    """:class:`~exai.store.sql.Executor` over one asyncpg connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def fetch(self, sql: str, *args: Any) -> Sequence[Sequence[Any]]:
        return await self._conn.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return await self._conn.fetchrow(sql, *args)

    async def execute(self, sql: str, *args: Any) -> int:
        return _status_count(await self._conn.execute(sql, *args))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)
