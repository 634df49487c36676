"""Schema migrations for every room that keeps tables: conversations, memory, jobs.

Each room lists its scripts as ``(version, script)`` pairs and records what ran in
a version table of its own (``schema_version``, ``memory_schema_version``,
``jobs_schema_version``, the audit outbox's ``outbox_schema_version``), so the
rooms evolve separately. One runner per kind of
database applies what a table has not recorded, inside the caller's transaction:

* :func:`apply_migrations` on Postgres, under an advisory lock, so daemons that
  start together migrate one at a time. A script goes to the server whole: its
  simple-query protocol takes several statements at once.
* :func:`apply_sqlite_migrations` on SQLite, on any
  :class:`~exai.sqldb.executor.Executor`. Python's ``sqlite3`` runs one statement
  per call, and ``executescript`` would commit the caller's transaction first, so a
  script is cut into statements by :func:`sqlite_statements`.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from exai.sqldb.executor import Executor, ThreadConnection, drive

__all__ = [
    "Migrations",
    "apply_migrations",
    "apply_sqlite_migrations",
    "migrate_sqlite_now",
    "sqlite_statements",
]

Migrations = Sequence[tuple[int, str]]

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def sqlite_statements(script: str) -> list[str]:
    """Cut a SQLite script into its statements, each without its final ``;``.

    A ``;`` ends a statement only where SQLite's own tokenizer says the text
    before it is complete (``sqlite3.complete_statement``): one inside a quoted
    string or identifier, a comment, or a trigger's ``BEGIN ... END`` body stays
    in its statement. Text after the last ``;`` that is not a complete statement
    (an unclosed quote, a trigger without its ``END;``) raises ``ValueError``.
    """
    statements: list[str] = []
    start = 0
    end = script.find(";")
    while end != -1:
        if sqlite3.complete_statement(script[start : end + 1]):
            text = script[start:end].strip()
            if text:
                statements.append(text)
            start = end + 1
        end = script.find(";", end + 1)
    rest = script[start:].strip()
    if rest:
        if not sqlite3.complete_statement(rest + "\n;"):
            raise ValueError(f"unterminated statement in a migration script: {rest[:80]!r}")
        statements.append(rest)
    return statements


def _checked(name: str) -> str:
    if not _TABLE_NAME.match(name):
        raise ValueError(f"{name!r} is not a plain lower-case SQL name")
    return name


async def apply_sqlite_migrations(db: Executor, table: str, migrations: Migrations) -> int:
    """Apply the ``migrations`` ``table`` has not recorded; return the version.

    Run inside the caller's write transaction, so a script that fails leaves
    nothing of itself or of the scripts after it.
    """
    table = _checked(table)
    await db.execute(
        f"CREATE TABLE IF NOT EXISTS {table}"
        " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    row = await db.fetchrow(f"SELECT COALESCE(MAX(version), 0) FROM {table}")
    current = int(row[0]) if row else 0
    for version, script in migrations:
        if version <= current:
            continue
        for statement in sqlite_statements(script):
            await db.execute(statement)
        await db.execute(f"INSERT INTO {table} VALUES (?, ?)", version, time.time())
        current = version
    return current


def migrate_sqlite_now(conn: sqlite3.Connection, table: str, migrations: Migrations) -> int:
    """:func:`apply_sqlite_migrations` for a caller that is not async (the audit
    outbox, in its own thread), in a write transaction of its own."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = drive(apply_sqlite_migrations(ThreadConnection(conn), table, migrations))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return version


async def apply_migrations(
    conn: Any, schema: str, room: str, table: str, migrations: Migrations
) -> int:
    """Apply the ``migrations`` ``schema``'s ``table`` has not recorded; return the version.

    ``conn`` is an asyncpg connection inside a transaction: a transaction-scoped
    advisory lock per (room, schema) lets daemons that start together migrate one
    at a time (and works through Supabase's transaction pooler, where a session
    lock could be released on another backend). ``{s}`` in a script is the schema.
    """
    schema, table = _checked(schema), _checked(table)
    digest = hashlib.sha256(f"exai.{room}:{schema}".encode()).digest()
    await conn.execute("SELECT pg_advisory_xact_lock($1)",
                       int.from_bytes(digest[:8], "big", signed=True))  # fmt: skip
    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {schema}.{table}"
        " (version integer PRIMARY KEY, applied_at double precision NOT NULL)"
    )
    current = int(await conn.fetchval(f"SELECT COALESCE(MAX(version), 0) FROM {schema}.{table}"))
    for version, script in migrations:
        if version <= current:
            continue
        await conn.execute(script.replace("{s}", schema))
        await conn.execute(f"INSERT INTO {schema}.{table} VALUES ($1, $2)", version, time.time())
        current = version
    return current
