"""A SQLite connection on a thread of its own: how every room uses its SQLite file.

SQLite calls block, so the event loop hands them to one dedicated thread per
connection and awaits the result: the conversation store's writer and reader,
memory, jobs and the audit outbox each have one. A transaction runs there whole,
``BEGIN`` to ``COMMIT``, as one hop from the event loop
(:meth:`SqliteThread.transaction`): its read-then-write steps never interleave
with another writer in the process, ``BEGIN IMMEDIATE`` serialises it against
other processes, and one hop per operation rather than per statement is what
keeps writes from queueing when many calls finish at once. The body runs in a
copy of the caller's context, so its log lines carry the call's ids. A caller
cancelled while its operation is still queued leaves it undone; once it runs, it
runs to its commit or rollback.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["PRAGMAS", "SqliteThread", "prepare_file"]

T = TypeVar("T")

PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON")
_BUSY_TIMEOUT_S = 10.0


def prepare_file(
    path: Path, connect: Callable[[str], Any], pragmas: Sequence[str] = PRAGMAS
) -> Any:
    """``connect(path)``, its directory made first, with ``pragmas``.

    ``connect`` opens the connection (``sqlite3`` or the bundled ``pysqlite3``,
    with ``isolation_level=None`` so that transactions are the caller's, and
    ``check_same_thread=False``: the connection is made here and used on its
    thread). Switching a new file to WAL can fail with "database is locked"
    without SQLite calling its busy handler when two processes open the file at
    the same moment, so a pragma is tried again for a while. Blocking: call it off
    the event loop.
    """
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(str(path))
    try:
        for pragma in pragmas:
            _retry_busy(conn, f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


def _retry_busy(conn: Any, statement: str) -> None:
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class SqliteThread:
    """One thread, and the connection (if any) that only it uses.

    The thread takes work from a queue and answers through the event loop's
    ``call_soon_threadsafe``: a hop costs about what aiosqlite's own did, less than
    a ``ThreadPoolExecutor``'s (its work items, locks and chained futures measured
    12% more CPU per store operation).
    """

    def __init__(self, conn: Any, name: str) -> None:
        self.conn = conn
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            loop, future, work = item
            if future.cancelled():  # its caller stopped waiting while it was queued
                continue
            try:
                result = work()
            except BaseException as exc:
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the thread (for a connection its caller manages)."""
        if self._closed:
            raise RuntimeError("this SQLite thread is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._queue.put((loop, future, functools.partial(context.run, fn, *args, **kwargs)))
        return await future

    async def transaction(self, fn: Callable[[Any], T], begin: str = "BEGIN IMMEDIATE") -> T:
        """``fn(conn)`` in one transaction on the thread (``begin``: ``BEGIN`` for a
        read), committed if it returns, rolled back if it raises."""
        conn = self.conn

        def run() -> T:
            conn.execute(begin)
            try:
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # some errors end the transaction themselves
                    conn.execute("ROLLBACK")
                raise
            return result

        return await self.call(run)

    async def close(self) -> None:
        """Close the connection on its thread, then let the thread go. Idempotent."""
        if self._closed:
            return
        try:
            if self.conn is not None:
                await self.call(self.conn.close)
        finally:
            self._closed = True
            self._queue.put(None)

    def shutdown(self, *, wait: bool) -> None:
        """Stop taking work (the caller closed its connection); an operation already
        running finishes on its own."""
        self._closed = True
        self._queue.put(None)
        if wait:
            self._thread.join()


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
