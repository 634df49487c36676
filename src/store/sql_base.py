"""What every part of the SQL conversation store stands on: connections, one dialect,
the owner check, and the statements several parts share.

:class:`SqlBase` is mixed into :class:`~exai.store.sql.SqlStore` under each part
(threads, turns, artifacts). A backend supplies connections through
:meth:`SqlBase._read` and :meth:`SqlBase._write` and a
:class:`~exai.sqldb.executor.Dialect`.

Every operation is a function of a connection handed to ``_read`` or ``_write``,
rather than a block inside a context manager, so that a backend can run the whole
function where its connection lives: SQLite runs it on its connection's thread in
one step instead of one thread hop per statement. A body therefore awaits nothing
but the :class:`~exai.sqldb.executor.Executor` it is given.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import TypeVar

from exai.logs import get_logger
from exai.sqldb.executor import Dialect, Executor
from exai.store.base import ANY_OWNER, Owner, StoreLimits, Thread
from exai.store.rows import (
    MESSAGE_COLUMNS,
    MESSAGE_INSERT_COLUMNS,
    THREAD_COLUMNS,
    check_thread_id,
    decode_thread,
    expired_error,
    not_found_error,
)

__all__ = [
    "INSERT_MESSAGE",
    "INSERT_THREAD",
    "MESSAGES",
    "UPSERT_FILE",
    "Body",
    "SqlBase",
    "T",
]

T = TypeVar("T")
Body = Callable[[Executor], Awaitable[T]]

_THREAD = f"SELECT {THREAD_COLUMNS} FROM {{p}}threads WHERE id = ?"
MESSAGES = f"SELECT {MESSAGE_COLUMNS} FROM {{p}}messages WHERE thread_id = ?"
INSERT_MESSAGE = (
    f"INSERT INTO {{p}}messages ({MESSAGE_INSERT_COLUMNS})"
    f" VALUES ({', '.join('?' * (MESSAGE_INSERT_COLUMNS.count(',') + 1))})"
)
INSERT_THREAD = (
    f"INSERT INTO {{p}}threads ({THREAD_COLUMNS})"
    f" VALUES ({', '.join('?' * (THREAD_COLUMNS.count(',') + 1))})"
)
UPSERT_FILE = (
    "INSERT INTO {p}thread_files (thread_id, path, last_seq) VALUES (?, ?, ?)"
    " ON CONFLICT (thread_id, path) DO UPDATE SET last_seq = excluded.last_seq"
)


class SqlBase:
    """Connections, the dialect, the clock and limits, and the owner check."""

    dialect: Dialect

    def __init__(self, limits: StoreLimits, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self._clock = clock
        self._log = get_logger("exai.store")

    @abstractmethod
    async def _read(self, body: Body[T]) -> T:
        """Run ``body`` on a connection that sees committed data."""

    @abstractmethod
    async def _write(self, body: Body[T]) -> T:
        """Run ``body`` in a transaction that serializes writers; commit if it returns."""

    def _q(self, template: str) -> str:
        return self.dialect.sql(template)

    async def _owned(
        self, db: Executor, thread_id: str, owner: Owner, *, lock: bool = False
    ) -> tuple[Thread, int]:
        """The thread and its size in characters, if ``owner`` may see it."""
        sql = self._q(_THREAD) + (self.dialect.lock_row if lock else "")
        row = await db.fetchrow(sql, thread_id)
        if row is None or row[8] is not None or (owner is not ANY_OWNER and row[1] != owner):
            raise not_found_error(thread_id)
        thread = decode_thread(row, self.limits.ttl_s)
        if thread.expires_at <= self._clock():
            raise expired_error(thread)
        return thread, row[11]

    async def _live(self, db: Executor, thread_id: str) -> str:
        """The thread's id if it exists and is not deleted, whoever owns it."""
        tid = check_thread_id(thread_id)
        row = await db.fetchrow(self._q("SELECT deleted_at FROM {p}threads WHERE id = ?"), tid)
        if row is None or row[0] is not None:
            raise not_found_error(tid)
        return tid
