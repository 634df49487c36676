"""Daily usage sums: calls, tokens and cost per UTC day, principal, key, face and model.

The console's Usage page, ``exai usage --by key|face`` (and any ``--split``) and
the spend a key shows in ``exai keys list`` read ``usage_days``: one row per UTC
day, principal, key (``''`` for a credential that is not one of the operator's
keys), face, model that answered (``''`` for a call without a model call; the
request log's comma-separated list when a call asked several) and currency
(``''`` for calls without a price), holding the sums of the request log's rows
(:mod:`exai.store.call_log`) that fall in it.

Why sums of their own rather than a ``GROUP BY`` over the request log: a month
at a million calls is a million rows to read on every page view, seconds on
SQLite, where the sums of the same month are a few thousand rows. The sums are
added in the same transaction as the request log's rows they count
(:meth:`exai.store.call_log.CallLog.record_calls` calls :func:`usage_deltas` and
:data:`UPSERT`), so the two never disagree, and they are not pruned with the
log: what a key spent stays visible after ``EXAI_REQUEST_LOG_DAYS``.

A call counts on the UTC day it ended. Amounts are integer billionths of the
currency (*nanos*), like the request log. Schema version 14 (which also sums the
request log's rows already kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from exai.errors import ValidationError_
from exai.store.sql_base import SqlBase

if TYPE_CHECKING:
    from exai.store.call_log import CallLogRow

__all__ = [
    "POSTGRES_TABLES",
    "SQLITE_TABLES",
    "UPSERT",
    "USAGE_GROUPS",
    "UsageDays",
    "UsageSum",
    "usage_deltas",
]

DAY: Final = 86400
# What the sums may be grouped (and split) by, and the column each names.
USAGE_GROUPS: Final[dict[str, str]] = {
    "day": "day",
    "principal": "principal",
    "key": "key_id",
    "face": "face",
    "model": "model",
}
_KEY = "day, principal, key_id, face, model, currency"
_SUMMED = ("calls", "errors", "model_calls", "prompt_tokens", "completion_tokens", "cost")

# The request log's rows already kept, summed as record_calls sums new ones.
_BACKFILL = (
    f"INSERT INTO {{s}}usage_days ({_KEY}, {', '.join(_SUMMED)})"
    " SELECT CAST(FLOOR(at / 86400) AS BIGINT), principal, COALESCE(key_id, ''), face,"
    " COALESCE(model, ''), COALESCE(currency, ''), COUNT(*),"
    " SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END), SUM(model_calls), SUM(prompt_tokens),"
    " SUM(completion_tokens), SUM(cost) FROM {s}call_log"
    " GROUP BY CAST(FLOOR(at / 86400) AS BIGINT), principal, COALESCE(key_id, ''), face,"
    " COALESCE(model, ''), COALESCE(currency, '');\n"
)

SQLITE_TABLES = """
CREATE TABLE usage_days (
    day INTEGER NOT NULL,
    principal TEXT NOT NULL,
    key_id TEXT NOT NULL,
    face TEXT NOT NULL,
    model TEXT NOT NULL,
    currency TEXT NOT NULL,
    calls INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    model_calls INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost INTEGER NOT NULL,
    PRIMARY KEY (day, principal, key_id, face, model, currency)
) WITHOUT ROWID;
CREATE INDEX usage_days_principal ON usage_days(principal, day);
CREATE INDEX usage_days_key ON usage_days(key_id, currency, day) WHERE key_id <> '';
""" + _BACKFILL.replace("{s}", "")

POSTGRES_TABLES = """
CREATE TABLE {s}.usage_days (
    day bigint NOT NULL,
    principal text NOT NULL,
    key_id text NOT NULL,
    face text NOT NULL,
    model text NOT NULL,
    currency text NOT NULL,
    calls bigint NOT NULL,
    errors bigint NOT NULL,
    model_calls bigint NOT NULL,
    prompt_tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL,
    cost bigint NOT NULL,
    PRIMARY KEY (day, principal, key_id, face, model, currency)
);
CREATE INDEX usage_days_principal ON {s}.usage_days(principal, day);
CREATE INDEX usage_days_key ON {s}.usage_days(key_id, currency, day) WHERE key_id <> '';
""" + _BACKFILL.replace("{s}", "{s}.")

# Adds one delta of :func:`usage_deltas` to its row (made at zero when absent).
UPSERT: Final = (
    f"INSERT INTO {{p}}usage_days AS u ({_KEY}, {', '.join(_SUMMED)})"
    f" VALUES ({', '.join('?' * 12)}) ON CONFLICT ({_KEY}) DO UPDATE SET "
    + ", ".join(f"{c} = u.{c} + excluded.{c}" for c in _SUMMED)
)


def usage_deltas(rows: Sequence[CallLogRow]) -> list[tuple[Any, ...]]:
    """What a batch of request-log rows adds to the daily sums, one tuple per row of
    ``usage_days`` it touches (the key's six columns, then the six sums), in key
    order: two daemons adding overlapping batches lock rows in the same order."""
    sums: dict[tuple[Any, ...], list[int]] = {}
    for row in rows:
        key = (int(row.at // DAY), row.principal, row.key_id or "", row.face, row.model or "",
               row.currency or "")  # fmt: skip
        held = sums.get(key)
        if held is None:
            held = sums[key] = [0, 0, 0, 0, 0, 0]
        held[0] += 1
        held[1] += row.status != "ok"
        held[2] += row.model_calls
        held[3] += row.prompt_tokens
        held[4] += row.completion_tokens
        held[5] += row.cost
    return [(*key, *held) for key, held in sorted(sums.items())]


@dataclass(frozen=True, slots=True)
class UsageSum:
    """The sums of one group (and split value) in one currency (None: unpriced calls).
    ``key`` and ``split`` are the group's values as text (a day as its number since
    the epoch), None where the calls had none (no key, no model)."""

    key: str | None
    split: str | None
    currency: str | None
    calls: int
    errors: int
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: int  # nanos


def _column(name: str, what: str) -> str:
    column = USAGE_GROUPS.get(name)
    if column is None:
        raise ValidationError_(
            f"cannot {what} usage by {name!r}; choose one of {', '.join(USAGE_GROUPS)}"
        )
    return column


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


class UsageDays(SqlBase):
    """Reads the daily sums (a part of ``SqlStore``); the writes ride on the request
    log's (:meth:`~exai.store.call_log.CallLog.record_calls`)."""

    async def usage_sums(
        self, first_day: int, end_day: int, by: str, split: str | None = None, *,
        principal: str | None = None,
    ) -> list[UsageSum]:  # fmt: skip
        """The sums of the UTC days ``[first_day, end_day)`` (days since the epoch) per
        ``by`` (and ``split``) and currency: every principal's (the operator's view),
        or only ``principal``'s. Ordered by group, split, currency."""
        column = _column(by, "group")
        other = "NULL" if split is None else _column(split, "split")
        if split is not None and other == column:
            raise ValidationError_(f"usage is already grouped by {by}; split by another")
        where, args = "day >= ? AND day < ?", list[Any]([first_day, end_day])
        if principal is not None:
            where, args = "principal = ? AND " + where, [principal, *args]
        sums = ", ".join(f"SUM({c})" for c in _SUMMED)
        groups = column if split is None else f"{column}, {other}"
        sql = self._q(f"SELECT {column}, {other}, currency, {sums} FROM {{p}}usage_days"
                      f" WHERE {where} GROUP BY {groups}, currency")  # fmt: skip
        rows = await self._read(lambda db: db.fetch(sql, *args))
        out = [
            UsageSum(_text(r[0]), _text(r[1]), _text(r[2]), *(int(v or 0) for v in r[3:]))
            for r in rows
        ]
        return sorted(out, key=lambda s: (s.key or "", s.split or "", s.currency or ""))

    async def key_spent(self, key_id: str, currency: str, first_day: int, end_day: int) -> int:
        """Nanos the key spent in ``currency`` in the UTC days ``[first_day, end_day)``."""
        sql = self._q("SELECT SUM(cost) FROM {p}usage_days WHERE key_id = ? AND currency = ?"
                      " AND day >= ? AND day < ?")  # fmt: skip
        row = await self._read(lambda db: db.fetchrow(sql, key_id, currency, first_day, end_day))
        return int(row[0] or 0) if row else 0
