"""One SQLite connection on a thread of its own, for the rooms that keep a file of their own.

Memory and jobs each keep a SQLite file beside the conversations and use it through
one connection on one dedicated thread. Every transaction runs there whole,
``BEGIN IMMEDIATE`` to ``COMMIT``, as one hop from the event loop: its
read-then-write steps never interleave with another writer in the process, and the
file's lock serialises it against other processes. The body runs in a copy of the
caller's context, so its log lines carry the call's ids.

(The conversation store has a reader beside its writer and runs on aiosqlite's
threads instead; see :mod:`exai.store.sqlite`.)
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["PRAGMAS", "SqliteThread", "prepare_file"]

T = TypeVar("T")

PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON")


def prepare_file(path: Path, connect: Callable[[str], Any]) -> Any:
    """``connect(path)``, its directory made first, with the pragmas every room's file uses.

    ``connect`` opens the connection (``sqlite3`` or the bundled ``pysqlite3``,
    with ``isolation_level=None`` so that transactions are the caller's). Blocking:
    call it off the event loop.
    """
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(str(path))
    for pragma in PRAGMAS:
        conn.execute(f"PRAGMA {pragma}")
    return conn


class SqliteThread:
    """A connection and the one thread that uses it."""

    def __init__(self, conn: Any, name: str) -> None:
        self.conn = conn
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._closed = False

    async def transaction(self, fn: Callable[[Any], T]) -> T:
        """``fn(conn)`` in one write transaction on the thread; committed if it returns."""
        context = contextvars.copy_context()
        conn = self.conn

        def run() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = context.run(fn, conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # some errors end the transaction themselves
                    conn.execute("ROLLBACK")
                raise
            return result

        return await asyncio.get_running_loop().run_in_executor(self._pool, run)

    async def close(self) -> None:
        """Close the connection on its thread, then let the thread go. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self.conn.close)
        finally:
            self._pool.shutdown(wait=False)
