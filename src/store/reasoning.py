"""The reasoning of callers' tool rounds, kept in the store beside the daemons' memory.

:class:`~exai.providers.tool_reasoning.ToolReasoning` keeps, in one daemon's
memory, the reasoning of each tool round exai returned to a stateless caller,
keyed by a digest over the owner and the conversation up to the round. These
rows are the same entries in the conversation store, so that a round made on
one daemon is found on another (Postgres) or after a restart (SQLite): written
in batches off the call path (:mod:`exai.cluster.reasoning`), read only for
the rounds a daemon's memory does not hold, one query per request.

Each principal has a budget of bytes here as in memory (an entry counts its
reasoning's UTF-8 plus a fixed overhead, as in memory): :meth:`prune_tool_reasoning`
removes expired rows, then each principal's oldest-written rows beyond its
budget, so one principal's volume never pushes out another's.

:class:`ReasoningRows` is a part of :class:`~exai.store.sql.SqlStore`; its table
comes with the console's sign-ins (:mod:`exai.store.sign_ins`) in schema version 9.
"""

from __future__ import annotations

from collections.abc import Sequence

from exai.port import KeptReasoning
from exai.sqldb.executor import Executor
from exai.store.sql_base import SqlBase

__all__ = ["POSTGRES_TABLE", "SQLITE_TABLE", "ReasoningRows"]

SQLITE_TABLE = """
CREATE TABLE tool_reasoning (
    key BLOB PRIMARY KEY,
    owner TEXT NOT NULL,
    reasoning TEXT NOT NULL,
    size INTEGER NOT NULL,
    stored_at REAL NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX tool_reasoning_owner ON tool_reasoning(owner, stored_at);
CREATE INDEX tool_reasoning_expires ON tool_reasoning(expires_at);
"""

POSTGRES_TABLE = """
CREATE TABLE {s}.tool_reasoning (
    key bytea PRIMARY KEY,
    owner text NOT NULL,
    reasoning text NOT NULL,
    size bigint NOT NULL,
    stored_at double precision NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX tool_reasoning_owner ON {s}.tool_reasoning(owner, stored_at);
CREATE INDEX tool_reasoning_expires ON {s}.tool_reasoning(expires_at);
"""

# A later write of the same round (the same conversation answered again) replaces
# the earlier one, unless it is another owner's: the key hashes the owner in, so
# that would be a collision, and the first owner keeps its row.
_PUT = (
    "INSERT INTO {p}tool_reasoning (key, owner, reasoning, size, stored_at, expires_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET"
    " reasoning = excluded.reasoning, size = excluded.size,"
    " stored_at = excluded.stored_at, expires_at = excluded.expires_at"
    " WHERE {p}tool_reasoning.owner = excluded.owner"
)
_GET = (
    "SELECT key, owner, reasoning, size, stored_at, expires_at FROM {p}tool_reasoning"
    " WHERE owner = ? AND expires_at > ?"
)
# Keys asked for in one statement: a request names each of its rounds at most, and
# the dialect keeps one rewritten statement per distinct count.
_KEYS_PER_STATEMENT = 128
# Each principal's rows, newest first, beyond the first ``budget`` bytes of them.
_OVER_BUDGET = """
DELETE FROM {p}tool_reasoning WHERE key IN (
    SELECT key FROM (
        SELECT key, SUM(size) OVER (PARTITION BY owner ORDER BY stored_at DESC, key
                                    ROWS UNBOUNDED PRECEDING) AS running
        FROM {p}tool_reasoning
    ) ranked WHERE running > ?
)
"""


class ReasoningRows(SqlBase):
    """Kept tool-round reasoning, on the store's connections (a part of ``SqlStore``)."""

    async def put_tool_reasoning(self, rows: Sequence[KeptReasoning]) -> None:
        """Write ``rows`` in one transaction; a row for a key already kept replaces it."""
        if not rows:
            return
        sql = self._q(_PUT)
        values = [tuple(r) for r in rows]

        async def body(tx: Executor) -> None:
            await tx.executemany(sql, values)

        await self._write(body)

    async def tool_reasoning(
        self, owner: str, keys: Sequence[bytes], now: float | None = None
    ) -> list[KeptReasoning]:
        """The live rows of ``owner`` among ``keys``; one query."""
        if not keys:
            return []
        now = self._clock() if now is None else now
        chunks = [list(keys[i : i + _KEYS_PER_STATEMENT])
                  for i in range(0, len(keys), _KEYS_PER_STATEMENT)]  # fmt: skip

        async def body(db: Executor) -> list[Sequence[object]]:
            rows: list[Sequence[object]] = []
            for chunk in chunks:
                sql = self._q(_GET + f" AND key IN ({', '.join('?' * len(chunk))})")
                rows += await db.fetch(sql, owner, now, *chunk)
            return rows

        return [
            KeptReasoning(bytes(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4]), float(r[5]))
            for r in await self._read(body)
        ]

    async def prune_tool_reasoning(self, per_owner_bytes: int, now: float | None = None) -> int:
        """Remove expired rows, then each owner's oldest beyond ``per_owner_bytes``;
        how many went."""
        now = self._clock() if now is None else now
        expired = self._q("DELETE FROM {p}tool_reasoning WHERE expires_at <= ?")
        over = self._q(_OVER_BUDGET)

        async def body(tx: Executor) -> int:
            return await tx.execute(expired, now) + await tx.execute(over, per_owner_bytes)

        count: int = await self._write(body)
        return count
