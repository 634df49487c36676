"""The ``postgres`` sink: the same ``audit_events`` table over a connection string.

One statement per batch, ``INSERT ... SELECT FROM unnest(...) ON CONFLICT
(event_id) DO NOTHING``: one round trip, atomic, and idempotent on
``event_id``. Errors are sorted by SQLSTATE class: data, integrity and
schema errors (22, 23, 42 except privileges) reject the batch; everything
else (connection loss, shutdown, resources, serialization) is retried.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import asyncpg

from exai.audit.events import COLUMNS, parse_ts, to_row
from exai.audit.sinks import SinkRejected, SinkUnavailable

__all__ = ["PostgresSink"]

_INSERT: Final = f"""
INSERT INTO {{table}} ({", ".join(COLUMNS)}, data)
SELECT * FROM unnest(
    $1::uuid[], $2::text[], $3::timestamptz[], $4::text[], $5::text[],
    $6::text[], $7::text[], $8::text[], $9::text[], $10::jsonb[]
)
ON CONFLICT (event_id) DO NOTHING
"""
_PERMANENT_CLASSES: Final = frozenset({"22", "23", "42"})
_RETRYABLE_STATES: Final = frozenset({"42501"})  # insufficient privilege: a deployment issue


def _column(rows: list[dict[str, Any]], name: str) -> list[Any]:
    return [row[name] for row in rows]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class PostgresSink:
    name = "postgres"

    def __init__(self, dsn: str, *, table: str = "audit_events", timeout_s: float = 30.0) -> None:
        self._dsn = dsn
        self._statement = _INSERT.format(table=table)
        self._timeout_s = timeout_s
        self._conn: asyncpg.Connection | None = None

    async def open(self) -> None:
        """Connect lazily: a database that is down at start-up is a retry, not a crash."""
        return None

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn, timeout=self._timeout_s)
        return self._conn

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        rows = [to_row(event) for event in events]
        ts: list[datetime] = [parse_ts(str(row["ts"])) for row in rows]
        args = [
            _column(rows, "event_id"),
            [_text(v) for v in _column(rows, "kind")],
            ts,
            *[[_text(v) for v in _column(rows, name)] for name in COLUMNS[3:]],
            [json.dumps(row["data"], ensure_ascii=False, default=str) for row in rows],
        ]
        try:
            conn = await self._connection()
            await conn.execute(self._statement, *args, timeout=self._timeout_s)
        except asyncpg.PostgresError as exc:
            state = getattr(exc, "sqlstate", None) or ""
            reason = f"SQLSTATE {state}: {exc}"
            if state[:2] in _PERMANENT_CLASSES and state not in _RETRYABLE_STATES:
                raise SinkRejected(reason) from exc
            await self._discard()
            raise SinkUnavailable(reason) from exc
        except (TimeoutError, OSError, asyncpg.InterfaceError) as exc:
            if isinstance(exc, ValueError):  # asyncpg could not encode the batch
                raise SinkRejected(f"{type(exc).__name__}: {exc}") from exc
            await self._discard()
            raise SinkUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await asyncio.wait_for(conn.close(), timeout=2.0)
            except (TimeoutError, OSError, asyncpg.PostgresError):
                conn.terminate()
