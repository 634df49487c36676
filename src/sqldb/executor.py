"""The connection interface the store's SQL runs on, and how each backend spells it.

Statements are written once, with ``?`` placeholders, a ``{p}`` table prefix and
``{lock}`` where rows are taken; a :class:`Dialect` rewrites them for its driver
(``$1`` placeholders, the ``exai.`` schema and ``FOR UPDATE SKIP LOCKED`` on
Postgres). The conversation store and the job store share it. An
:class:`Executor` is the four calls the store makes on a connection, whatever the
driver; :class:`ThreadConnection` is one over a sqlite3 connection, whose
statements run at once, so :func:`drive` runs a whole body of them in one go on
the connection's own thread.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Final, Protocol, TypeVar

__all__ = ["Dialect", "Executor", "ThreadConnection", "drive", "insert_all"]

T = TypeVar("T")


class Executor(Protocol):
    """The four calls the store makes on a connection, whatever the driver."""

    async def fetch(self, sql: str, *args: Any) -> Sequence[Sequence[Any]]: ...

    async def fetchrow(self, sql: str, *args: Any) -> Sequence[Any] | None: ...

    async def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; returns the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


@dataclass(frozen=True)
class Dialect:
    """How a backend spells what the statements here need."""

    prefix: str = ""  # schema qualifier, "exai." on Postgres
    numbered_params: bool = False  # $1, $2... instead of ?
    lock_row: str = ""  # appended to a SELECT that must lock the thread row
    # What "{lock}" becomes: on Postgres a SELECT that takes rows for this transaction
    # alone skips those another holds; SQLite's one writer needs nothing.
    skip_locked: str = ""
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, template: str) -> str:
        text = self._cache.get(template)
        if text is None:
            text = template.replace("{p}", self.prefix).replace("{lock}", self.skip_locked)
            if self.numbered_params:
                counter = iter(range(1, 1000))
                text = re.sub(r"\?", lambda _: f"${next(counter)}", text)
            self._cache[template] = text
        return text


class ThreadConnection:
    """:class:`Executor` over a sqlite3 connection, on its own thread.

    Its methods are coroutines only to fit the interface: each runs its statement
    at once and never suspends, which is what lets :func:`drive` run a whole body
    of them in one go.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def fetch(self, sql: str, *args: Any) -> Sequence[Sequence[Any]]:
        return self._conn.execute(sql, args).fetchall()

    async def fetchrow(self, sql: str, *args: Any) -> Sequence[Any] | None:
        row: Sequence[Any] | None = self._conn.execute(sql, args).fetchone()
        return row

    async def execute(self, sql: str, *args: Any) -> int:
        return max(self._conn.execute(sql, args).rowcount, 0)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` for each of ``rows``; a plain INSERT of one row (``INSERT ...
        VALUES (?, ...)``, nothing after it) as INSERTs of many rows at once.

        sqlite3's ``executemany`` gives up the interpreter lock for each row's
        step and takes it back after: on the store's thread, under a busy event
        loop, a hand-over of the lock each way a row, and the system time of
        both threads' waits (measured: the store's thread at 8 to 13 µs of CPU
        a request-log row beside a busy loop, 6 with many rows a statement).
        Many rows a statement take it back once for them all. Every write runs
        in a transaction of its own (``BEGIN IMMEDIATE``), so the rows are in
        all together or not at all, as before."""
        split = _one_row_insert(sql)
        if split is not None and not isinstance(rows, list | tuple):  # an iterator, once
            rows = list(rows)
        if split is None or len(rows) < 2:
            self._conn.executemany(sql, rows)
            return
        head, row, width = split
        at, left = 0, len(rows)
        for size in _sizes(width):
            statement = sql if size == 1 else _many_rows(head, row, size)
            while left >= size:
                self._conn.execute(statement, tuple(chain.from_iterable(rows[at : at + size])))
                at, left = at + size, left - size


# A plain INSERT of one row of parameters, nothing after it (no ON CONFLICT, no
# RETURNING): what executemany may turn into INSERTs of many rows.
_ONE_ROW: Final = re.compile(r"^(INSERT(?: OR \w+)? INTO .+ VALUES) (\(\?(?:, ?\?)*\))$", re.S)
# SQLite's smallest limit on a statement's parameters (999 before 3.32, 32,766 since).
_MAX_PARAMETERS: Final = 999
_splits: dict[str, tuple[str, str, int] | None] = {}
_statements: dict[tuple[str, str, int], str] = {}


def _one_row_insert(sql: str) -> tuple[str, str, int] | None:
    """``sql``'s head and row of placeholders and its width, if it is a plain INSERT
    of one row; None otherwise."""
    try:
        return _splits[sql]
    except KeyError:
        match = _ONE_ROW.match(sql.strip())
        split = (match[1], match[2], match[2].count("?")) if match else None
        if len(_splits) < 1024:  # the store's statements are a fixed few
            _splits[sql] = split
        return split


def _sizes(width: int) -> tuple[int, ...]:
    """How many rows a statement takes, largest first (at most 32, within the limit)."""
    top = max(1, min(32, _MAX_PARAMETERS // width))
    return tuple(sorted({n for n in (top, 8, 2, 1) if n <= top}, reverse=True))


def _many_rows(head: str, row: str, n: int) -> str:
    statement = _statements.get((head, row, n))
    if statement is None:
        statement = f"{head} " + ", ".join([row] * n)
        if len(_statements) < 4096:  # a few sizes of the store's fixed few statements
            _statements[(head, row, n)] = statement
    return statement


def drive(awaitable: Awaitable[T]) -> T:
    """Run an awaitable that never suspends to its end, here and now."""
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    close = getattr(steps, "close", None)
    if close is not None:
        close()
    raise RuntimeError("a store operation awaited something other than its connection")


async def insert_all(
    write: Any, dialect: Dialect, template: str, values: Sequence[Sequence[Any]]
) -> None:
    """Insert ``values`` with the statement ``template`` (``{p}`` and ``?`` as every
    store writes them), all or none, in one transaction of the store's ``write``."""
    if not values:
        return
    sql = dialect.sql(template)

    async def body(tx: Executor) -> None:
        await tx.executemany(sql, values)

    await write(body)
