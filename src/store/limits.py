"""Per-principal limits an operator sets at run time, and the budget alerts already sent.

``principal_limits`` holds one row per principal with the values that override
the environment's (``EXAI_BUDGETS``, ``EXAI_RATE_LIMIT_PER_MIN``) and the models
it may use; a column left NULL keeps the default. ``exai limits`` and
``/admin/limits`` write it; every daemon on the store reads the whole table again
when its change marker (:meth:`LimitRows.limits_marker`) moves, so a change is
honoured everywhere within a poll (see :mod:`exai.accounting.limits`).

``limit_alerts`` remembers each threshold notification sent (principal, budget
period, threshold): the daemon whose insert lands sends it, so a principal is
told once per period however many daemons see its spend cross the line.

Both tables arrive in schema version 13.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from exai.sqldb.executor import Executor
from exai.store.sql_base import SqlBase

__all__ = ["POSTGRES_TABLES", "SQLITE_TABLES", "LimitRow", "LimitRows"]

SQLITE_TABLES = """
CREATE TABLE principal_limits (
    principal TEXT PRIMARY KEY,
    budget_amount TEXT,
    budget_currency TEXT,
    budget_period TEXT,
    rate_per_min REAL,
    models TEXT,
    updated_at REAL NOT NULL,
    updated_by TEXT
) WITHOUT ROWID;
CREATE TABLE limit_alerts (
    principal TEXT NOT NULL,
    period_key TEXT NOT NULL,
    sent_at REAL NOT NULL,
    PRIMARY KEY (principal, period_key)
) WITHOUT ROWID;
"""

POSTGRES_TABLES = """
CREATE TABLE {s}.principal_limits (
    principal text PRIMARY KEY,
    budget_amount text,
    budget_currency text,
    budget_period text,
    rate_per_min double precision,
    models text,
    updated_at double precision NOT NULL,
    updated_by text
);
CREATE TABLE {s}.limit_alerts (
    principal text NOT NULL,
    period_key text NOT NULL,
    sent_at double precision NOT NULL,
    PRIMARY KEY (principal, period_key)
);
"""

_COLUMNS = ("principal, budget_amount, budget_currency, budget_period, rate_per_min, models,"
            " updated_at, updated_by")  # fmt: skip


@dataclass(frozen=True, slots=True)
class LimitRow:
    """One principal's overrides as stored; None: the default applies."""

    principal: str
    budget_amount: str | None = None
    budget_currency: str | None = None
    budget_period: str | None = None
    rate_per_min: float | None = None
    models: tuple[str, ...] | None = None
    updated_at: float = 0.0
    updated_by: str | None = None


def _row(raw: Sequence[object]) -> LimitRow:
    models = None if raw[5] is None else tuple(json.loads(str(raw[5])))
    return LimitRow(str(raw[0]), _text(raw[1]), _text(raw[2]), _text(raw[3]),
                    None if raw[4] is None else float(raw[4]),  # type: ignore[arg-type]
                    models, float(raw[6]), _text(raw[7]))  # type: ignore[arg-type]  # fmt: skip


def _text(value: object) -> str | None:
    return None if value is None else str(value)


class LimitRows(SqlBase):
    """Principal limits and sent alerts, on the store's connections (a part of ``SqlStore``)."""

    async def principal_limits(self) -> list[LimitRow]:
        sql = self._q(f"SELECT {_COLUMNS} FROM {{p}}principal_limits ORDER BY principal")
        rows = await self._read(lambda db: db.fetch(sql))
        return [_row(r) for r in rows]

    async def limits_marker(self) -> tuple[int, float]:
        """Changes whenever a row is written or removed: (rows, newest write)."""
        sql = self._q("SELECT COUNT(*), COALESCE(MAX(updated_at), 0) FROM {p}principal_limits")
        row = await self._read(lambda db: db.fetchrow(sql))
        return (0, 0.0) if row is None else (int(row[0]), float(row[1]))

    async def put_principal_limits(self, row: LimitRow) -> None:
        """Write ``row`` whole (the caller merged it with what was there)."""
        models = None if row.models is None else json.dumps(list(row.models))
        sql = self._q(
            f"INSERT INTO {{p}}principal_limits ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (principal) DO UPDATE SET budget_amount = EXCLUDED.budget_amount,"
            " budget_currency = EXCLUDED.budget_currency,"
            " budget_period = EXCLUDED.budget_period, rate_per_min = EXCLUDED.rate_per_min,"
            " models = EXCLUDED.models, updated_at = EXCLUDED.updated_at,"
            " updated_by = EXCLUDED.updated_by"
        )
        # updated_at only moves forward, so the marker changes even within one clock tick.
        at = max(row.updated_at or time.time(), (await self.limits_marker())[1] + 1e-6)

        async def body(tx: Executor) -> None:
            await tx.execute(sql, row.principal, row.budget_amount, row.budget_currency,
                             row.budget_period, row.rate_per_min, models, at,
                             row.updated_by)  # fmt: skip

        await self._write(body)

    async def clear_principal_limits(self, principal: str) -> bool:
        """Remove the principal's overrides; False when it had none."""
        sql = self._q("DELETE FROM {p}principal_limits WHERE principal = ?")
        removed: int = await self._write(lambda tx: tx.execute(sql, principal))
        return removed > 0

    async def claim_limit_alert(self, principal: str, period_key: str, now: float) -> bool:
        """Record that the alert ``period_key`` goes to ``principal``; False when some
        daemon recorded it already (then it has been, or is being, sent)."""
        sql = self._q("INSERT INTO {p}limit_alerts (principal, period_key, sent_at)"
                      " VALUES (?, ?, ?) ON CONFLICT DO NOTHING")  # fmt: skip
        added: int = await self._write(lambda tx: tx.execute(sql, principal, period_key, now))
        return added > 0
