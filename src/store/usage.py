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
SQLite. Two narrower tables keep the same sums with fewer columns apart:
``usage_days_keys`` (day, principal, key) and ``usage_days_models`` (day, face,
model). Every key, face and model of a month kept apart at once is tens of
thousands of rows; the operator's page needs days by model or face, and keys
with their principals, which the narrow tables hold in a few thousand, and
:func:`table_for` picks the narrowest that answers. The sums are added in the
same transaction as the request log's rows they count
(:meth:`exai.store.call_log.CallLog.record_calls` calls :func:`usage_deltas` and
:data:`UPSERTS`), so they never disagree, and they are not pruned with the log:
what a key spent stays visible after ``EXAI_REQUEST_LOG_DAYS``.

A call counts on the UTC day it ended. Amounts are integer billionths of the
currency (*nanos*), like the request log. Schema version 14 (which also sums the
request log's rows already kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from exai.errors import ValidationError_
from exai.store.sql_base import SqlBase

__all__ = [
    "POSTGRES_TABLES",
    "SQLITE_TABLES",
    "TABLES",
    "UPSERTS",
    "USAGE_GROUPS",
    "CountedCall",
    "UsageDays",
    "UsageSum",
    "table_for",
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
_SUMMED = ("calls", "errors", "model_calls", "prompt_tokens", "completion_tokens", "cost")
# The tables, each with the columns it keeps apart (the last, currency, in every one):
# the whole breakdown, and two narrower ones the operator's page reads (see below).
TABLES: Final[dict[str, tuple[str, ...]]] = {
    "usage_days": ("day", "principal", "key_id", "face", "model", "currency"),
    "usage_days_keys": ("day", "principal", "key_id", "currency"),
    "usage_days_models": ("day", "face", "model", "currency"),
}


def _backfill(table: str, s: str) -> str:
    """Sum the request log's rows already kept into ``table`` (``usage_days`` first, the
    narrower ones from it), as :func:`usage_deltas` sums new ones."""
    key = ", ".join(TABLES[table])
    if table == "usage_days":
        return (
            f"INSERT INTO {s}usage_days ({key}, {', '.join(_SUMMED)})"
            " SELECT CAST(FLOOR(at / 86400) AS BIGINT), principal, COALESCE(key_id, ''), face,"
            " COALESCE(model, ''), COALESCE(currency, ''), COUNT(*),"
            " SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END), SUM(model_calls),"
            f" SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM {s}call_log"
            " GROUP BY CAST(FLOOR(at / 86400) AS BIGINT), principal, COALESCE(key_id, ''), face,"
            " COALESCE(model, ''), COALESCE(currency, '');\n"
        )
    sums = ", ".join(f"SUM({c})" for c in _SUMMED)
    return (f"INSERT INTO {s}{table} ({key}, {', '.join(_SUMMED)})"
            f" SELECT {key}, {sums} FROM {s}usage_days GROUP BY {key};\n")  # fmt: skip


def _tables(kinds: dict[str, str], s: str) -> str:
    out = []
    for table, columns in TABLES.items():
        cols = [f"{c} {kinds['day'] if c == 'day' else kinds['text']} NOT NULL" for c in columns]
        cols += [f"{c} {kinds['int']} NOT NULL" for c in _SUMMED]
        rowid = " WITHOUT ROWID" if kinds["int"] == "INTEGER" else ""
        out.append(f"CREATE TABLE {s}{table} (\n    " + ",\n    ".join(cols)
                   + f",\n    PRIMARY KEY ({', '.join(columns)})\n){rowid};\n")  # fmt: skip
    # One principal's own figures, and a key's spend in its budget period.
    out.append(f"CREATE INDEX usage_days_principal ON {s}usage_days(principal, day);\n")
    out.append(f"CREATE INDEX usage_days_key ON {s}usage_days_keys(key_id, currency, day)"
               " WHERE key_id <> '';\n")  # fmt: skip
    out += [_backfill(table, s) for table in TABLES]
    return "".join(out)


SQLITE_TABLES: Final = _tables({"day": "INTEGER", "text": "TEXT", "int": "INTEGER"}, "")
POSTGRES_TABLES: Final = _tables({"day": "bigint", "text": "text", "int": "bigint"}, "{s}.")


def _upsert(table: str) -> str:
    key = ", ".join(TABLES[table])
    marks = ", ".join("?" * (len(TABLES[table]) + len(_SUMMED)))
    return (
        f"INSERT INTO {{p}}{table} AS u ({key}, {', '.join(_SUMMED)}) VALUES ({marks})"
        f" ON CONFLICT ({key}) DO UPDATE SET "
        + ", ".join(f"{c} = u.{c} + excluded.{c}" for c in _SUMMED)
    )


# Adds the deltas of :func:`usage_deltas` to their rows (made at zero when absent).
UPSERTS: Final[dict[str, str]] = {table: _upsert(table) for table in TABLES}
_WHOLE = TABLES["usage_days"]


class CountedCall(Protocol):
    """What the sums read of a request-log row (:class:`~exai.store.call_log.CallLogRow`,
    which imports this module, so it is named here by what it has)."""

    @property
    def at(self) -> float: ...
    @property
    def principal(self) -> str: ...
    @property
    def key_id(self) -> str | None: ...
    @property
    def face(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def currency(self) -> str | None: ...
    @property
    def status(self) -> str: ...
    @property
    def model_calls(self) -> int: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def cost(self) -> int: ...


def usage_deltas(rows: Sequence[CountedCall]) -> dict[str, list[tuple[Any, ...]]]:
    """What a batch of request-log rows adds to each table of sums: per table, one tuple
    per row it touches (its key's columns, then the six sums), in key order, so that two
    daemons adding overlapping batches lock rows in the same order."""
    whole: dict[tuple[Any, ...], list[int]] = {}
    for row in rows:
        key = (int(row.at // DAY), row.principal, row.key_id or "", row.face, row.model or "",
               row.currency or "")  # fmt: skip
        held = whole.get(key)
        if held is None:
            held = whole[key] = [0, 0, 0, 0, 0, 0]
        held[0] += 1
        held[1] += row.status != "ok"
        held[2] += row.model_calls
        held[3] += row.prompt_tokens
        held[4] += row.completion_tokens
        held[5] += row.cost
    out = {"usage_days": [(*key, *held) for key, held in sorted(whole.items())]}
    for table, columns in TABLES.items():
        if table == "usage_days":
            continue
        picks = [_WHOLE.index(c) for c in columns]
        narrow: dict[tuple[Any, ...], list[int]] = {}
        for key, held in whole.items():
            sums = narrow.setdefault(tuple(key[i] for i in picks), [0, 0, 0, 0, 0, 0])
            for i, value in enumerate(held):
                sums[i] += value
        out[table] = [(*key, *held) for key, held in sorted(narrow.items())]
    return out


def table_for(columns: set[str]) -> str:
    """The narrowest table that keeps ``columns`` apart. The operator's page asks the
    narrow ones: a month of every key, face and model kept apart at once is tens of
    thousands of rows where days by face and model, or days by key, are a few."""
    for table in ("usage_days_models", "usage_days_keys"):
        if columns <= set(TABLES[table]):
            return table
    return "usage_days"


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
        needed = {column, "day"} | ({other} if split is not None else set())
        table = table_for(needed | ({"principal"} if principal is not None else set()))
        sql = self._q(f"SELECT {column}, {other}, currency, {sums} FROM {{p}}{table}"
                      f" WHERE {where} GROUP BY {groups}, currency")  # fmt: skip
        rows = await self._read(lambda db: db.fetch(sql, *args))
        out = [
            UsageSum(_text(r[0]), _text(r[1]), _text(r[2]), *(int(v or 0) for v in r[3:]))
            for r in rows
        ]
        return sorted(out, key=lambda s: (s.key or "", s.split or "", s.currency or ""))

    async def key_spent(self, key_id: str, currency: str, first_day: int, end_day: int) -> int:
        """Nanos the key spent in ``currency`` in the UTC days ``[first_day, end_day)``."""
        sql = self._q("SELECT SUM(cost) FROM {p}usage_days_keys WHERE key_id = ?"
                      " AND currency = ? AND day >= ? AND day < ?")  # fmt: skip
        row = await self._read(lambda db: db.fetchrow(sql, key_id, currency, first_day, end_day))
        return int(row[0] or 0) if row else 0
