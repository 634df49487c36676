"""The outbox file's tables and the two SQL helpers every write goes through.

Kept apart from :mod:`exai.audit.outbox`, which says what each operation
means; this says how the file is laid out and how rows get into it.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["MIGRATIONS", "Transaction", "insert_rows"]

# Version 1 is the layout files had before the outbox recorded versions: its
# statements create only what is missing, so such a file takes it as it is.
_V1: Final = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS archive (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    shipped_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS archive_ts ON archive (ts);
CREATE TABLE IF NOT EXISTS quarantine (
    event_id TEXT PRIMARY KEY,
    ts TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    reason TEXT NOT NULL,
    quarantined_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value);
"""
MIGRATIONS: Final = ((1, _V1),)


# Rows per INSERT statement: one statement of many rows costs half what as many
# one-row statements do (executemany), and 100 rows of 5 values stay under the
# 999 parameters older SQLite builds allow.
_ROWS_PER_INSERT: Final = 100


@functools.lru_cache(maxsize=16)
def _insert_sql(target: str, width: int, count: int) -> str:
    row = "(" + ", ".join("?" * width) + ")"
    return f"INSERT OR IGNORE INTO {target} VALUES " + ", ".join([row] * count)


def insert_rows(
    db: sqlite3.Connection, target: str, width: int, rows: Sequence[tuple[Any, ...]]
) -> None:
    """``INSERT OR IGNORE`` ``rows`` into ``target`` ("table (columns)"), in few statements."""
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        db.execute(_insert_sql(target, width, len(chunk)), [v for row in chunk for v in row])


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> sqlite3.Connection:
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._db.execute("COMMIT")
        else:
            self._db.execute("ROLLBACK")
