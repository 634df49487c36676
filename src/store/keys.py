"""The operator's keys and revoked JWT ids, kept in the store so every daemon on it
honours them.

A key's row holds its id, the SHA-256 of its secret (never the secret), the
principal it names and its grant (scopes, budget, rate, models, expiry), when it
was made, last used and revoked, and a name and note (:class:`exai.keys.KeyRecord`).
``revoked_jtis`` names the JWTs refused before their expiry. ``key_changes`` is
one row whose ``version`` every write of either table moves: a daemon polls it
(one primary-key read) and reloads both tables only when it moved
(:mod:`exai.daemon.keys`). Marking keys used does not move it.

The tables come in schema version 11.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from exai.keys import KeyRecord, RevokedJti, parse_key_budget
from exai.sqldb.executor import Executor
from exai.store.sql_base import SqlBase

__all__ = ["POSTGRES_TABLES", "SQLITE_TABLES", "KeyRows"]

SQLITE_TABLES = """
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    principal TEXT NOT NULL,
    scopes TEXT,
    budget TEXT,
    rate_per_min INTEGER,
    models TEXT,
    expires_at REAL,
    created_at REAL NOT NULL,
    last_used_at REAL,
    revoked_at REAL,
    name TEXT NOT NULL,
    note TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE revoked_jtis (
    jti TEXT PRIMARY KEY,
    revoked_at REAL NOT NULL,
    note TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE key_changes (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO key_changes (id, version) VALUES (1, 0);
"""

POSTGRES_TABLES = """
CREATE TABLE {s}.api_keys (
    id text PRIMARY KEY,
    secret_hash text NOT NULL,
    principal text NOT NULL,
    scopes text,
    budget text,
    rate_per_min integer,
    models text,
    expires_at double precision,
    created_at double precision NOT NULL,
    last_used_at double precision,
    revoked_at double precision,
    name text NOT NULL,
    note text NOT NULL
);
CREATE TABLE {s}.revoked_jtis (
    jti text PRIMARY KEY,
    revoked_at double precision NOT NULL,
    note text NOT NULL
);
CREATE TABLE {s}.key_changes (
    id integer PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);
INSERT INTO {s}.key_changes (id, version) VALUES (1, 0);
"""

_COLUMNS = ("id, secret_hash, principal, scopes, budget, rate_per_min, models, expires_at,"
            " created_at, last_used_at, revoked_at, name, note")  # fmt: skip
_INSERT = f"INSERT INTO {{p}}api_keys ({_COLUMNS}) VALUES ({', '.join('?' * 13)})"
_REVOKE = "UPDATE {p}api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"
_BUMP = "UPDATE {p}key_changes SET version = version + 1 WHERE id = 1"


def _names(value: frozenset[str] | None) -> str | None:
    return None if value is None else json.dumps(sorted(value))


def _row(record: KeyRecord) -> tuple[Any, ...]:
    budget = record.budget
    budget_text = (
        None
        if budget is None
        else json.dumps(
            {"amount": str(budget.amount), "currency": budget.currency, "period": budget.period}
        )
    )
    return (record.id, record.secret_hash, record.principal, _names(record.scopes), budget_text,
            record.rate_per_min, _names(record.models), record.expires_at, record.created_at,
            record.last_used_at, record.revoked_at, record.name, record.note)  # fmt: skip


def _record(row: Sequence[Any]) -> KeyRecord:
    def names(text: Any) -> frozenset[str] | None:
        return None if text is None else frozenset(json.loads(text))

    def number(value: Any) -> float | None:
        return None if value is None else float(value)

    return KeyRecord(
        id=str(row[0]), secret_hash=str(row[1]), principal=str(row[2]), scopes=names(row[3]),
        budget=None if row[4] is None else parse_key_budget(json.loads(row[4])),
        rate_per_min=None if row[5] is None else int(row[5]), models=names(row[6]),
        expires_at=number(row[7]), created_at=float(row[8]), last_used_at=number(row[9]),
        revoked_at=number(row[10]), name=str(row[11]), note=str(row[12]),
    )  # fmt: skip


class KeyRows(SqlBase):
    """Keys and revoked JWT ids, on the store's connections (a part of ``SqlStore``)."""

    async def keys_version(self) -> int:
        """The change marker: it moves on every write that changes who may sign in."""
        sql = self._q("SELECT version FROM {p}key_changes WHERE id = 1")
        row = await self._read(lambda db: db.fetchrow(sql))
        return int(row[0]) if row else 0

    async def put_key(self, record: KeyRecord) -> None:
        insert, bump = self._q(_INSERT), self._q(_BUMP)

        async def body(tx: Executor) -> None:
            await tx.execute(insert, *_row(record))
            await tx.execute(bump)

        await self._write(body)

    async def keys_and_jtis(self) -> tuple[int, list[KeyRecord], list[RevokedJti]]:
        """Everything a daemon's key ring holds, and the version it was read at."""
        version = self._q("SELECT version FROM {p}key_changes WHERE id = 1")
        keys = self._q(f"SELECT {_COLUMNS} FROM {{p}}api_keys ORDER BY created_at, id")
        jtis = self._q("SELECT jti, revoked_at, note FROM {p}revoked_jtis ORDER BY revoked_at")

        async def body(db: Executor) -> tuple[int, list[KeyRecord], list[RevokedJti]]:
            row = await db.fetchrow(version)
            key_rows = await db.fetch(keys)
            jti_rows = await db.fetch(jtis)
            return (int(row[0]) if row else 0, [_record(r) for r in key_rows],
                    [RevokedJti(str(r[0]), float(r[1]), str(r[2])) for r in jti_rows])  # fmt: skip

        return await self._read(body)

    async def key(self, key_id: str) -> KeyRecord | None:
        sql = self._q(f"SELECT {_COLUMNS} FROM {{p}}api_keys WHERE id = ?")
        row = await self._read(lambda db: db.fetchrow(sql, key_id))
        return None if row is None else _record(row)

    async def revoke_key(self, key_id: str, now: float) -> KeyRecord | None:
        """Revoke a key (a key already revoked keeps its time); the key, or None."""
        update = self._q(_REVOKE)
        select = self._q(f"SELECT {_COLUMNS} FROM {{p}}api_keys WHERE id = ?")
        bump = self._q(_BUMP)

        async def body(tx: Executor) -> KeyRecord | None:
            if await tx.execute(update, now, key_id):
                await tx.execute(bump)
            row = await tx.fetchrow(select, key_id)
            return None if row is None else _record(row)

        return await self._write(body)

    async def rotate_key(self, key_id: str, fresh: KeyRecord, now: float) -> KeyRecord | None:
        """Revoke ``key_id`` and keep ``fresh`` (its settings, a new id and digest) in one
        transaction; the old key as it now is, or None when there is none."""
        update = self._q(_REVOKE)
        select = self._q(f"SELECT {_COLUMNS} FROM {{p}}api_keys WHERE id = ?")
        insert, bump = self._q(_INSERT), self._q(_BUMP)

        async def body(tx: Executor) -> KeyRecord | None:
            row = await tx.fetchrow(select, key_id)
            if row is None:
                return None
            await tx.execute(update, now, key_id)
            await tx.execute(insert, *_row(fresh))
            await tx.execute(bump)
            return _record(await tx.fetchrow(select, key_id) or row)

        return await self._write(body)

    async def update_key(self, record: KeyRecord) -> bool:
        """Keep ``record``'s grant, name and note for its key (not its principal, digest
        or times); False when there is no such key, or it was revoked."""
        sql = self._q("UPDATE {p}api_keys SET scopes = ?, budget = ?, rate_per_min = ?,"
                      " models = ?, expires_at = ?, name = ?, note = ?"
                      " WHERE id = ? AND revoked_at IS NULL")  # fmt: skip
        row = _row(record)
        args = (row[3], row[4], row[5], row[6], row[7], row[11], row[12], record.id)
        bump = self._q(_BUMP)

        async def body(tx: Executor) -> bool:
            if not await tx.execute(sql, *args):
                return False
            await tx.execute(bump)
            return True

        return await self._write(body)

    async def revoke_jti(self, jti: str, now: float, note: str = "") -> bool:
        """Refuse the JWT whose ``jti`` this is; False if it was already refused."""
        insert = self._q("INSERT INTO {p}revoked_jtis (jti, revoked_at, note) VALUES (?, ?, ?)"
                         " ON CONFLICT (jti) DO NOTHING")  # fmt: skip
        bump = self._q(_BUMP)

        async def body(tx: Executor) -> bool:
            added = await tx.execute(insert, jti, now, note)
            if added:
                await tx.execute(bump)
            return bool(added)

        return await self._write(body)

    async def mark_keys_used(self, used: Mapping[str, float]) -> None:
        """Note when each key was last presented (written in batches, off the hot path)."""
        if not used:
            return
        sql = self._q("UPDATE {p}api_keys SET last_used_at = ? WHERE id = ?"
                      " AND (last_used_at IS NULL OR last_used_at < ?)")  # fmt: skip
        rows = [(at, key_id, at) for key_id, at in sorted(used.items())]
        await self._write(lambda tx: tx.executemany(sql, rows))
