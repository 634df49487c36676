"""The request log: one row per call, in the conversation store, for people to scan.

Every call that reaches the dispatcher, from any face (a ``call_tool`` over
WebSocket or the MCP shim, MCP over HTTP, a model-face request, the console, a
job), ends in exactly one :class:`CallLogRow`: when it ended, who made it (and
with which of the operator's keys), through which face and client, the tool and
the model asked for, the model that answered, its tokens, cost and latency, how
it ended (``ok``, or ``error`` with its code) and its trace. The console's
Requests page, ``exai requests`` and the request-log benchmark read it through
:meth:`CallLog.call_log_page`, the one query they share.

Why a table of its own, and not a view over the audit trail and ``call_costs``:
the audit trail lives in a sink that may not be readable (Supabase, a JSONL
file) and its local outbox keeps only the newest events; ``call_costs`` has one
row per *model* call and none for a call that made no model call or was
refused. Joining them per page at a million calls would be neither possible
everywhere nor fast. So the dispatcher writes one narrow row per call at the
call's end, queued and written in batches by the ledger's writer beside the
cost rows (no call waits for it), and the page is one indexed query:

- rows are ordered newest first by ``(at, id)`` and paged by that key (keyset
  pagination: a page costs the same at row 50 and at row 999,950, where OFFSET
  would walk every row before it);
- each exact-match filter with many values (principal, key, tool, model, error
  code, trace, client) has an index that starts with it and then follows the
  page's order, so a filtered page reads only its own rows; the few values of
  face, status and the model asked are served by the time index;
- a live tail asks for rows whose ``id`` is above the highest id when the page
  was drawn: ids grow as rows are written, on both backends;
- the log is bounded: rows older than ``EXAI_REQUEST_LOG_DAYS`` are removed by
  the writer (:meth:`CallLog.prune_call_log`), at most once an hour.

Amounts are integer billionths of the currency (*nanos*), like ``call_costs``.
Schema version 12.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from exai.errors import ValidationError_
from exai.port import REQUEST_LOG_FILTERS
from exai.sqldb.executor import Dialect, Executor
from exai.store.usage import UPSERTS as USAGE_UPSERTS
from exai.store.usage import usage_deltas

__all__ = [
    "CALL_LOG_FILTERS",
    "POSTGRES_TABLES",
    "SQLITE_TABLES",
    "CallFilter",
    "CallLog",
    "CallLogRow",
    "Cursor",
]

# Columns with an index of their own (see the module's docstring).
_INDEXED = ("principal", "key_id", "tool", "model", "error_code", "trace_id", "client")

SQLITE_TABLES = """
CREATE TABLE call_log (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    instance_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    key_id TEXT,
    face TEXT NOT NULL,
    client TEXT,
    tool TEXT NOT NULL,
    model_asked TEXT,
    model TEXT,
    provider TEXT,
    model_calls INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    thread_id TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    currency TEXT,
    cost INTEGER NOT NULL,
    latency_ms REAL NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    trace_id TEXT
);
CREATE INDEX call_log_at ON call_log(at);
""" + "".join(
    f"CREATE INDEX call_log_{c} ON call_log({c}, at)"
    + ("" if c in ("principal", "tool") else f" WHERE {c} IS NOT NULL")
    + ";\n"
    for c in _INDEXED
)

POSTGRES_TABLES = """
CREATE TABLE {s}.call_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at double precision NOT NULL,
    instance_id text NOT NULL,
    principal text NOT NULL,
    key_id text,
    face text NOT NULL,
    client text,
    tool text NOT NULL,
    model_asked text,
    model text,
    provider text,
    model_calls integer NOT NULL,
    session_id text NOT NULL,
    request_id text NOT NULL,
    thread_id text,
    prompt_tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL,
    currency text,
    cost bigint NOT NULL,
    latency_ms double precision NOT NULL,
    status text NOT NULL,
    error_code text,
    trace_id text
);
CREATE INDEX call_log_at ON {s}.call_log(at, id);
""" + "".join(
    f"CREATE INDEX call_log_{c} ON {{s}}.call_log({c}, at, id)"
    + ("" if c in ("principal", "tool") else f" WHERE {c} IS NOT NULL")
    + ";\n"
    for c in _INDEXED
)


_MAX_FILTER = 256


class CallLogRow(NamedTuple):
    """One call as the request log keeps it. ``cost`` in nanos of ``currency``
    (None: no priced model call); ``model`` the model that answered (several,
    comma-separated, when the call asked more than one), None without a model call.

    A tuple, not a dataclass: every call makes one on its way out, and a tuple of
    23 fields is made several times faster than a frozen dataclass's."""

    at: float  # epoch seconds, when the call ended
    instance_id: str
    principal: str
    key_id: str | None
    face: str
    client: str | None
    tool: str
    model_asked: str | None
    model: str | None
    provider: str | None
    model_calls: int
    session_id: str
    request_id: str
    thread_id: str | None
    prompt_tokens: int
    completion_tokens: int
    currency: str | None
    cost: int
    latency_ms: float
    status: str  # "ok" or "error"
    error_code: str | None
    trace_id: str | None
    id: int | None = None  # the store's, once written

    def values(self) -> tuple[Any, ...]:
        """The columns an insert writes (all but the store's ``id``)."""
        return self[:-1]

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


_COLUMNS: Final = CallLogRow._fields[:-1]
_SELECT: Final = "id, " + ", ".join(_COLUMNS)
_INSERT: Final = (
    f"INSERT INTO {{p}}call_log ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
)
# What a page may be filtered by, each an exact match on its column.
CALL_LOG_FILTERS: Final = REQUEST_LOG_FILTERS
MAX_PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page starts: below the row ``(at, id)`` (the next, older page)."""

    at: float
    id: int

    def __str__(self) -> str:
        return f"{self.at!r}_{self.id}"

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        """A cursor as :meth:`__str__` wrote it; None for an empty or malformed one."""
        at, _, ident = text.strip().partition("_")
        try:
            return cls(float(at), int(ident))
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class CallFilter:
    """Which calls a page shows: exact matches (empty: any), and ``[since, until)``."""

    since: float | None = None
    until: float | None = None
    principal: str = ""
    key_id: str = ""
    face: str = ""
    client: str = ""
    tool: str = ""
    model_asked: str = ""
    model: str = ""
    status: str = ""
    error_code: str = ""
    trace_id: str = ""
    session_id: str = ""
    request_id: str = ""
    thread_id: str = ""

    @classmethod
    def of(cls, values: dict[str, Any]) -> CallFilter:
        """The filter from query parameters or options (unknown names ignored, values
        trimmed); raises ``VALIDATION_ERROR`` for a bad status or a value longer than any
        stored one (cut short, it would filter for another value)."""
        given = {name: str(values.get(name) or "").strip() for name in CALL_LOG_FILTERS}
        for name, value in given.items():
            if len(value) > _MAX_FILTER:
                raise ValidationError_(f"{name} is longer than {_MAX_FILTER} characters")
        if given["status"] not in ("", "ok", "error"):
            raise ValidationError_("status is ok or error")
        return cls(since=_number(values.get("since")), until=_number(values.get("until")),
                   **given)  # fmt: skip

    def where(self) -> tuple[list[str], list[Any]]:
        clauses, args = [], list[Any]()
        for name in CALL_LOG_FILTERS:
            value = getattr(self, name)
            if value:
                clauses.append(f"{name} = ?")
                args.append(value)
        if self.since is not None:
            clauses.append("at >= ?")
            args.append(self.since)
        if self.until is not None:
            clauses.append("at < ?")
            args.append(self.until)
        return clauses, args

    def query(self) -> dict[str, str]:
        """The filter as query parameters (only those set)."""
        out = {name: getattr(self, name) for name in CALL_LOG_FILTERS if getattr(self, name)}
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                out[name] = repr(value)
        return out


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise ValidationError_(f"{str(value)[:40]!r} is not a time in epoch seconds") from None


class CallLog:
    """Writes, pages and prunes :class:`CallLogRow` s; mixed into the SQL store."""

    dialect: Dialect

    @abstractmethod
    async def _read(self, body: Any) -> Any: ...

    @abstractmethod
    async def _write(self, body: Any) -> Any: ...

    async def record_calls(self, rows: Sequence[CallLogRow]) -> None:
        """Store the rows and add them to the daily usage sums (:mod:`exai.store.usage`),
        all or none, in one transaction."""
        if not rows:
            return
        insert, values = self.dialect.sql(_INSERT), [row.values() for row in rows]
        sums = [(self.dialect.sql(USAGE_UPSERTS[t]), d) for t, d in usage_deltas(rows).items()]

        async def body(tx: Executor) -> None:
            await tx.executemany(insert, values)
            for upsert, deltas in sums:
                await tx.executemany(upsert, deltas)

        await self._write(body)

    async def call_log_page(
        self, where: CallFilter, *, before: Cursor | None = None, after_id: int | None = None,
        limit: int = 50,
    ) -> list[CallLogRow]:  # fmt: skip
        """The newest ``limit`` rows matching ``where``, newest first: below ``before``
        (the next page), or only those written after the row ``after_id`` (a live tail)."""
        limit = max(1, min(int(limit), MAX_PAGE))
        clauses, args = where.where()
        if after_id is not None:
            clauses.append("id > ?")
            args.append(after_id)
        if before is not None:
            # "at <= ?" bounds the index range; the rest drops the cursor's row and
            # those before it at the same moment.
            clauses.append("at <= ? AND (at < ? OR id < ?)")
            args += [before.at, before.at, before.id]
        clause = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        # A tail's rows are the newest written: found by the primary key, not by time.
        order = "id DESC" if after_id is not None else "at DESC, id DESC"
        sql = self.dialect.sql(
            f"SELECT {_SELECT} FROM {{p}}call_log{clause} ORDER BY {order} LIMIT ?"
        )
        rows = await self._read(lambda db: db.fetch(sql, *args, limit))
        return [_row(r) for r in rows]

    async def call_log_row(self, row_id: int) -> CallLogRow | None:
        sql = self.dialect.sql(f"SELECT {_SELECT} FROM {{p}}call_log WHERE id = ?")
        row = await self._read(lambda db: db.fetchrow(sql, row_id))
        return None if row is None else _row(row)

    async def call_turn(
        self, principal: str, session_id: str, request_id: str
    ) -> tuple[str, int] | None:
        """The thread and first seq of the turn the call stored, if it stored one."""
        sql = self.dialect.sql(
            "SELECT thread_id, first_seq FROM {p}request_turns"
            " WHERE owner = ? AND session_id = ? AND request_id = ?"
        )
        row = await self._read(lambda db: db.fetchrow(sql, principal, session_id, request_id))
        return None if row is None else (str(row[0]), int(row[1]))

    async def call_log_top(self) -> int:
        """The highest row id written so far (0: none): where a live tail starts."""
        sql = self.dialect.sql("SELECT MAX(id) FROM {p}call_log")
        row = await self._read(lambda db: db.fetchrow(sql))
        return int(row[0] or 0) if row else 0

    async def prune_call_log(self, before: float) -> int:
        """Remove the rows of calls that ended before ``before``; how many went."""
        sql = self.dialect.sql("DELETE FROM {p}call_log WHERE at < ?")
        count: int = await self._write(lambda tx: tx.execute(sql, before))
        return count


def _row(r: Any) -> CallLogRow:
    ident, *rest = tuple(r)
    return CallLogRow(**dict(zip(_COLUMNS, rest, strict=True)), id=int(ident))
