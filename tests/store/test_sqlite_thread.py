"""SQLite runs each store operation as one function on its connection's thread.

These check what that design must still guarantee: a body that tries to await
anything but its connection is refused and leaves nothing behind, an operation
whose caller gave up before it reached the thread never runs, and the body runs
with the caller's context variables (so its log lines carry the call's ids).
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
from pathlib import Path

import pytest

from exai.sqldb.executor import Executor
from exai.store.sqlite import SqliteStore

OWNER = "alice"


@pytest.fixture
async def store(tmp_path: Path):
    s = await SqliteStore.open(tmp_path / "c.sqlite3")
    try:
        yield s
    finally:
        await s.aclose()


async def test_a_body_that_suspends_is_refused_and_rolled_back(store: SqliteStore) -> None:
    thread = await store.create_thread(OWNER, title="t")

    async def body(tx: Executor) -> None:
        await tx.execute("UPDATE threads SET title = ? WHERE id = ?", "changed", thread.id)
        await asyncio.sleep(0)  # not the connection: must not be allowed

    with pytest.raises(RuntimeError, match="awaited something other"):
        await store._write(body)
    assert (await store.get_thread(thread.id, OWNER)).title == "t"
    # The writer is still usable after the refusal.
    await store.append(thread.id, OWNER, [{"role": "user", "content": "hi"}], request_id="r1")
    assert [m.content for m in await store.messages(thread.id, OWNER)] == ["hi"]


async def test_a_failing_body_rolls_back_everything_it_wrote(store: SqliteStore) -> None:
    thread = await store.create_thread(OWNER, title="t")

    async def body(tx: Executor) -> None:
        await tx.execute("UPDATE threads SET title = ? WHERE id = ?", "changed", thread.id)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await store._write(body)
    assert (await store.get_thread(thread.id, OWNER)).title == "t"


async def test_an_operation_abandoned_while_queued_never_runs(store: SqliteStore) -> None:
    thread = await store.create_thread(OWNER, title="t")
    entered, release = threading.Event(), threading.Event()

    async def blocking(tx: Executor) -> None:
        # Runs on the writer's thread: holds it so the next operation stays queued.
        entered.set()
        release.wait(10)
        await tx.execute("UPDATE threads SET title = ? WHERE id = ?", "first", thread.id)

    first = asyncio.create_task(store._write(blocking))
    await asyncio.to_thread(entered.wait, 10)
    queued = asyncio.create_task(
        store.append(thread.id, OWNER, [{"role": "user", "content": "late"}], request_id="r1")
    )
    await asyncio.sleep(0.05)  # let it reach the writer's queue
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    release.set()
    await first
    assert (await store.get_thread(thread.id, OWNER)).title == "first"
    assert await store.messages(thread.id, OWNER) == []


async def test_the_body_sees_the_callers_context_variables(store: SqliteStore) -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("call-42")
    seen: list[tuple[str, str]] = []

    async def body(db: Executor) -> None:
        seen.append((marker.get(), threading.current_thread().name))
        await db.fetch("SELECT 1")

    await store._read(body)
    assert seen[0][0] == "call-42"
    assert seen[0][1] != threading.current_thread().name  # it did run on the store's thread


async def test_executemany_inserts_many_rows_a_statement_all_or_none(store: SqliteStore) -> None:
    """A plain one-row INSERT given many rows goes in as statements of many rows
    (one step each, see ThreadConnection.executemany): every row, in order, with
    its own values; a row that breaks a constraint leaves none of them; and a
    statement that is not a plain one-row INSERT still runs once a row."""
    create = "CREATE TABLE IF NOT EXISTS many (n INTEGER PRIMARY KEY, a TEXT, b REAL)"
    rows = [(n, f"row {n}", n / 2) for n in range(75)]  # 32 + 32 + 8 + 2 + 1

    async def write(tx: Executor) -> None:
        await tx.execute(create)
        await tx.executemany("INSERT INTO many (n, a, b) VALUES (?, ?, ?)", rows)

    async def read(tx: Executor) -> list:
        return list(await tx.fetch("SELECT n, a, b FROM many ORDER BY n"))

    await store._write(write)
    assert [tuple(r) for r in await store._write(read)] == rows

    # The 40th row repeats a key: the statement fails, and the transaction with it.
    clash = [(100 + n, "x", 0.0) for n in range(39)] + [(5, "again", 0.0)] + [(200, "y", 1.0)]

    async def clashing(tx: Executor) -> None:
        await tx.executemany("INSERT INTO many (n, a, b) VALUES (?, ?, ?)", clash)

    with pytest.raises(sqlite3.IntegrityError):
        await store._write(clashing)
    assert [tuple(r) for r in await store._write(read)] == rows

    # An upsert is not a plain INSERT: it runs row by row, each row's conflict its own.
    async def upsert(tx: Executor) -> None:
        await tx.executemany("INSERT INTO many (n, a, b) VALUES (?, ?, ?) "
                             "ON CONFLICT (n) DO UPDATE SET a = excluded.a",
                             [(1, "first", 0.0), (1, "second", 0.0)])  # fmt: skip

    await store._write(upsert)
    assert [tuple(r) for r in await store._write(read)][1] == (1, "second", 0.5)


def test_which_statements_executemany_takes_many_rows_at_a_time() -> None:
    from exai.sqldb.executor import _one_row_insert, _sizes

    assert _one_row_insert("INSERT INTO call_log (a, b) VALUES (?, ?)") == (
        "INSERT INTO call_log (a, b) VALUES", "(?, ?)", 2)  # fmt: skip
    assert _one_row_insert("INSERT OR IGNORE INTO t (a) VALUES (?)") is not None
    for other in ("INSERT INTO t (a) VALUES (?) ON CONFLICT (a) DO NOTHING",
                  "INSERT INTO t (a, b) VALUES (?, 0)", "INSERT INTO t SELECT ?",
                  "UPDATE t SET a = ?"):  # fmt: skip
        assert _one_row_insert(other) is None
    # Within SQLite's smallest limit on parameters (999) whatever the width.
    assert _sizes(22) == (32, 8, 2, 1) and _sizes(100) == (9, 8, 2, 1) and _sizes(2000) == (1,)
