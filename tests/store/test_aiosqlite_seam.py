"""aiosqlite's internals the SQLite store runs its transactions through
(``Connection._execute`` and ``Connection._conn``, see exai.store.sqlite): a test that
fails loudly, naming them, when an upgrade moves one (pyproject.toml pins aiosqlite
to the releases tested; docs/dependencies.md, Private APIs)."""

from __future__ import annotations

import sqlite3
import threading

import aiosqlite
import pytest

VERSION = getattr(aiosqlite, "__version__", "?")


def _gone(what: str) -> str:
    return (f"aiosqlite {VERSION}: {what} is gone or changed; exai.store.sqlite runs each "
            "transaction through it (docs/dependencies.md, Private APIs)")  # fmt: skip


async def test_execute_runs_a_function_on_the_connection_thread_with_its_raw_connection(tmp_path):
    conn = await aiosqlite.connect(tmp_path / "seam.sqlite3")
    try:
        assert callable(getattr(conn, "_execute", None)), _gone("Connection._execute")
        here = threading.get_ident()

        def transaction() -> tuple[int, bool]:
            raw = conn._conn
            assert isinstance(raw, sqlite3.Connection), _gone("Connection._conn")
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("CREATE TABLE t (x INTEGER)")
            raw.execute("INSERT INTO t VALUES (41)")
            (value,) = raw.execute("SELECT x + 1 FROM t").fetchone()
            raw.execute("COMMIT")
            return value, threading.get_ident() != here

        assert await conn._execute(transaction) == (42, True), _gone("Connection._execute")

        def fails() -> None:
            raise LookupError("from the connection's thread")

        with pytest.raises(LookupError):  # the function's own error reaches the caller
            await conn._execute(fails)
    finally:
        await conn.close()
