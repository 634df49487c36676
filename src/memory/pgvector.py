"""pgvector for the Postgres memory store: the extension, the vector column, its indexes.

Vectors are kept twice: as ``real[]`` (always, by the store) and, when the
``vector`` extension can be created (:func:`vector_extension`), as a pgvector
``vector`` searched through one HNSW index per dimension (:class:`PgVectors`): a
partial index on ``embedding::vector(d)`` for rows of that dimension, since one
HNSW index covers one dimension. When pgvector appears after memories were
stored without it, the next start copies the arrays into the vector column.

HNSW returns its nearest candidates before other conditions filter them, so a
search for one principal among many could come back short; pgvector's iterative
scan (0.8 and later) keeps scanning until the filtered results are enough.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from exai.memory.base import ScoredId

__all__ = ["PgVectors", "VectorExtension", "literal", "vector_extension"]


def literal(vector: Sequence[float]) -> str:
    """``vector`` as pgvector's text form, to be cast with ``::vector``."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


@dataclass(frozen=True, slots=True)
class VectorExtension:
    """Where the ``vector`` extension lives, or why it cannot be used (``reason``)."""

    schema: str | None
    reason: str | None
    iterative: bool  # it has the iterative index scan (pgvector 0.8 and later)


async def vector_extension(dsn: str, wanted: bool) -> VectorExtension:
    """Find the ``vector`` extension in the database at ``dsn``, creating it if allowed."""
    if not wanted:
        return VectorExtension(None, "turned off (EXAI_MEMORY_PGVECTOR=false)", False)
    conn = await asyncpg.connect(dsn)
    try:
        failure = None
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except asyncpg.PostgresError as exc:
            failure = f"CREATE EXTENSION vector failed: {exc}"
        row = await conn.fetchrow(
            "SELECT extnamespace::regnamespace::text, extversion FROM pg_extension"
            " WHERE extname = 'vector'"
        )
        if row is None:
            return VectorExtension(None, failure or "the vector extension is missing", False)
        version = tuple(int(p) for p in re.findall(r"\d+", str(row[1]))[:2])
        return VectorExtension(str(row[0]).strip('"'), None, version >= (0, 8))
    finally:
        await conn.close()


class PgVectors:
    """The ``embedding`` column of ``schema.memories`` and its HNSW indexes."""

    def __init__(self, schema: str, iterative: bool) -> None:
        self.schema = schema
        self.iterative = iterative
        self._indexed: set[int] = set()

    async def prepare(self, conn: Any) -> None:
        """Add the column if missing, fill it from arrays stored without pgvector, and
        index every dimension stored; inside the migration's transaction."""
        s = self.schema
        await conn.execute(f"ALTER TABLE {s}.memories ADD COLUMN IF NOT EXISTS embedding vector")
        await conn.execute(
            f"UPDATE {s}.memories SET embedding = embedding_array::vector"
            " WHERE embedding IS NULL AND embedding_array IS NOT NULL"
        )
        dims = await conn.fetch(
            f"SELECT DISTINCT dimension FROM {s}.memories WHERE dimension IS NOT NULL"
        )
        for row in dims:
            await self.index(conn, int(row[0]))

    async def index(self, conn: Any, dimension: int) -> None:
        """Make the HNSW index for vectors of ``dimension``, once."""
        if dimension in self._indexed:
            return
        d = int(dimension)
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS memories_hnsw_{d} ON {self.schema}.memories"
            f" USING hnsw ((embedding::vector({d})) vector_cosine_ops) WHERE dimension = {d}"
        )
        self._indexed.add(d)

    async def search(
        self, conn: Any, where: str, args: list[Any], vector: Sequence[float], limit: int
    ) -> list[ScoredId]:
        """The nearest rows matching ``where`` (numbered parameters ``args``) by cosine."""
        d = len(vector)
        q = len(args) + 1
        distance = f"(embedding::vector({d})) <=> ${q}::vector({d})"
        async with conn.transaction():
            if self.iterative:
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = await conn.fetch(
                f"SELECT id, {distance} AS distance FROM {self.schema}.memories"
                f" WHERE {where} ORDER BY {distance} LIMIT ${q + 1}",
                *args, literal(vector), limit,
            )  # fmt: skip
        return [ScoredId(r[0], 1.0 - float(r[1])) for r in rows]
