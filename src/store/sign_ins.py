"""The console's sign-ins, kept in the store so that every daemon on it honours them.

A sign-in is a row named by the SHA-256 of its cookie's value (the cookie itself
is never stored: reading the table does not sign anyone in), holding the
principal it names (as :func:`exai.web.console.sessions.principal_record`
writes it), its CSRF token, its expiry and the messages waiting to be shown
once. Signing in writes the row before the browser is answered, so the next
request finds it on whichever daemon it reaches; signing out deletes it. What
decides whether a row still signs someone in (expiry, the credential still
configured) is the console's (:mod:`exai.web.console.sign_ins`).

The table comes with the kept tool-round reasoning's (:mod:`exai.store.reasoning`)
in schema version 9.
"""

from __future__ import annotations

from collections.abc import Sequence

from exai.port import SignInRow
from exai.sqldb.executor import Executor
from exai.store.sql_base import SqlBase

__all__ = ["POSTGRES_TABLE", "SQLITE_TABLE", "SignInRow", "SignInRows"]

# The row is the port's type (faces read it); the store keeps it.

SQLITE_TABLE = """
CREATE TABLE console_sessions (
    id_hash TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    flashes TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX console_sessions_expires ON console_sessions(expires_at);
"""

POSTGRES_TABLE = """
CREATE TABLE {s}.console_sessions (
    id_hash text PRIMARY KEY,
    principal text NOT NULL,
    csrf text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    flashes text NOT NULL
);
CREATE INDEX console_sessions_expires ON {s}.console_sessions(expires_at);
"""

_COLUMNS = "id_hash, principal, csrf, created_at, expires_at, flashes"
_INSERT = f"INSERT INTO {{p}}console_sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"


class SignInRows(SqlBase):
    """Console sign-ins, on the store's connections (a part of ``SqlStore``)."""

    async def put_sign_in(self, row: SignInRow) -> None:
        """Keep a new sign-in, and forget those past their expiry (a sign-in is rare,
        so the sweep costs nothing a page view would pay)."""
        insert = self._q(_INSERT)
        sweep = self._q("DELETE FROM {p}console_sessions WHERE expires_at <= ?")

        async def body(tx: Executor) -> None:
            await tx.execute(sweep, row.created_at)
            await tx.execute(insert, *row)

        await self._write(body)

    async def sign_in_row(self, id_hash: str) -> SignInRow | None:
        sql = self._q(f"SELECT {_COLUMNS} FROM {{p}}console_sessions WHERE id_hash = ?")

        async def body(db: Executor) -> Sequence[object] | None:
            return await db.fetchrow(sql, id_hash)

        row = await self._read(body)
        if row is None:
            return None
        return SignInRow(str(row[0]), str(row[1]), str(row[2]), float(row[3]),
                         float(row[4]), str(row[5]))  # fmt: skip

    async def set_sign_in_flashes(self, id_hash: str, flashes: str) -> None:
        sql = self._q("UPDATE {p}console_sessions SET flashes = ? WHERE id_hash = ?")
        await self._write(lambda tx: tx.execute(sql, flashes, id_hash))

    async def delete_sign_in(self, id_hash: str) -> None:
        sql = self._q("DELETE FROM {p}console_sessions WHERE id_hash = ?")
        await self._write(lambda tx: tx.execute(sql, id_hash))
