"""The shared memory store: Postgres full-text search and pgvector with HNSW.

The tables live in the conversation store's schema (``exai``) beside its own,
with a migrations table of their own (``memory_schema_version``): memory has its
own versions and never shares the conversation store's numbering.

Vectors are kept as ``real[]`` always and, when pgvector can be used, in a
``vector`` column searched through HNSW indexes (:mod:`exai.memory.pgvector`).
Without pgvector (a plain Postgres such as Debian's 15), vectors are searched by
reading the principal's ``real[]`` vectors and comparing them in Python: correct,
slower, and said so in :meth:`PostgresMemoryStore.status`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from exai.logs import get_logger
from exai.memory.base import (
    ANY_OWNER,
    Memory,
    MemoryNotFoundError,
    MemoryStore,
    NewMemory,
    Owner,
    ScoredId,
)
from exai.memory.pgvector import PgVectors, literal, vector_extension
from exai.memory.postgres_import import BULK_MIN_ROWS, copy_memories, rebuilds_indexes
from exai.memory.queue import PostgresExtractionQueue
from exai.memory.ranking import choosing_rounds, cosine
from exai.memory.schema import MEMORY_COLUMNS, POSTGRES_MIGRATIONS, decode_memory
from exai.sqldb.migrations import apply_migrations
from exai.sqldb.postgres import check_schema_name, driver_options

__all__ = ["PostgresMemoryStore"]

log = get_logger("exai.memory")

# How long the common lexemes read from the planner's statistics are kept:
# ANALYZE (autovacuum's) changes them on that scale, not per query.
_COMMON_LEXEMES_TTL_S = 300.0


class _Filters:
    """SQL conditions with numbered parameters, starting after the ones already used."""

    def __init__(self, args: list[Any]) -> None:
        self.args = args
        self.sql = ""

    def add(self, condition: str, *values: Any) -> None:
        for value in values:
            self.args.append(value)
            condition = condition.replace("?", f"${len(self.args)}", 1)
        self.sql += f" AND {condition}"

    def types_projects(self, types: Sequence[str] | None, projects: Sequence[str] | None) -> None:
        if types:
            self.add("type = ANY(?::text[])", list(types))
        if projects is not None:
            self.add("(project IS NULL OR project = ANY(?::text[]))", list(projects))


class PostgresMemoryStore(MemoryStore):
    """Memories in a Postgres schema. Create with :meth:`open`."""

    def __init__(
        self, pool: asyncpg.Pool, schema: str, vector_reason: str | None,
        clock: Callable[[], float], iterative: bool = False, bulk_min: int = BULK_MIN_ROWS,
    ) -> None:  # fmt: skip
        self._pool = pool
        self._bulk_min = bulk_min
        self.schema = schema
        self._no_vec = vector_reason
        self._clock = clock
        self._vec = PgVectors(schema, iterative) if vector_reason is None else None
        self.extraction = PostgresExtractionQueue(pool, schema, clock)
        self._common: tuple[float, dict[str, float], float] | None = None

    @classmethod
    async def open(
        cls, url: str, *, schema: str = "exai", clock: Callable[[], float] = time.time,
        pgvector: bool = True, max_size: int = 10, bulk_min: int = BULK_MIN_ROWS,
    ) -> PostgresMemoryStore:  # fmt: skip
        """``bulk_min``: the smallest ``insert_many`` batch that may rebuild the search
        indexes (:func:`exai.memory.postgres_import.rebuilds_indexes`)."""
        check_schema_name(schema)
        dsn, options = driver_options(url)
        found = await vector_extension(dsn, pgvector)
        path = f'"{schema}", "{found.schema}", public' if found.schema else f'"{schema}", public'

        async def init(conn: Any) -> None:
            await conn.execute(f"SET search_path TO {path}")

        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=max_size, command_timeout=60,
                                         init=init, **options)  # fmt: skip
        store = cls(pool, schema, found.reason, clock, found.iterative, bulk_min)
        if found.reason:
            log.warning("pgvector unavailable: vectors are searched by a scan", reason=found.reason)
        try:
            await store._migrate()
        except BaseException:
            await store.aclose()
            raise
        return store

    async def _migrate(self) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await apply_migrations(conn, self.schema, "memory", "memory_schema_version",
                                   POSTGRES_MIGRATIONS)  # fmt: skip
            if self._vec is not None:
                await self._vec.prepare(conn)

    async def _index(self, conn: Any, dimension: int) -> None:
        if self._vec is not None:
            await self._vec.index(conn, dimension)

    # --- writes -------------------------------------------------------------------

    def _vector_sql(self, first: int) -> tuple[str, str]:
        """Column list and placeholders for a vector, its array and their model."""
        if self._no_vec is None:
            return (
                "embedding_model, dimension, embedding_array, embedding",
                f"${first}, ${first + 1}, ${first + 2}::real[], ${first + 3}::vector",
            )
        return (
            "embedding_model, dimension, embedding_array",
            f"${first}, ${first + 1}, ${first + 2}::real[]",
        )

    def _vector_args(self, vector: Sequence[float] | None, model: str | None) -> list[Any]:
        if vector is None:
            args: list[Any] = [None, None, None]
        else:
            args = [model, len(vector), [float(x) for x in vector]]
        if self._no_vec is None:
            args.append(literal(vector) if vector is not None else None)
        return args

    def _insert_sql(self) -> str:
        columns, marks = self._vector_sql(10)
        return (
            f"INSERT INTO {self.schema}.memories (id, owner, project, type, content, tags,"
            f" content_hash, source, created_at, updated_at, {columns})"
            f" VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $9, {marks})"
            " ON CONFLICT (owner, content_hash) DO NOTHING"
        )

    def _insert_args(
        self, memory: NewMemory, vector: Sequence[float] | None, model: str | None
    ) -> list[Any]:
        return [
            str(uuid.uuid4()), memory.owner, memory.project, memory.type, memory.content,
            json.dumps(memory.tags), memory.content_hash, memory.source, self._clock(),
            *self._vector_args(vector, model),
        ]  # fmt: skip

    async def insert(
        self, memory: NewMemory, vector: Sequence[float] | None, model: str | None
    ) -> Memory:
        async with self._pool.acquire() as conn, conn.transaction():
            if vector is not None:
                await self._index(conn, len(vector))
            await conn.execute(self._insert_sql(), *self._insert_args(memory, vector, model))
            row = await conn.fetchrow(
                f"SELECT {MEMORY_COLUMNS} FROM {self.schema}.memories"
                " WHERE owner = $1 AND content_hash = $2",
                memory.owner, memory.content_hash,
            )  # fmt: skip
        return decode_memory(row)

    async def insert_many(
        self, memories: Sequence[tuple[NewMemory, Sequence[float] | None]], model: str | None
    ) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            for dim in {len(v) for _, v in memories if v is not None}:
                await self._index(conn, dim)
            count = f"SELECT count(*) FROM {self.schema}.memories"
            stored = (int(await conn.fetchval(count, timeout=3600.0))
                      if len(memories) >= self._bulk_min else 0)  # fmt: skip
            rebuild = rebuilds_indexes(len(memories), stored, self._bulk_min)
            return await copy_memories(conn, self.schema, memories, model, self._clock(),
                                       pgvector=self._vec is not None,
                                       rebuild=rebuild)  # fmt: skip

    async def update(
        self, memory_id: str, owner: Owner, *, content: str, type: str, tags: Sequence[str],
        content_hash: str, vector: Sequence[float] | None, model: str | None,
    ) -> Memory:  # fmt: skip
        await self.get(memory_id, owner)
        columns, marks = self._vector_sql(7)
        sql = (
            f"UPDATE {self.schema}.memories SET (content, type, tags, content_hash, updated_at,"
            f" {columns}) = ($2, $3, $4::jsonb, $5, $6, {marks}) WHERE id = $1"
        )
        async with self._pool.acquire() as conn, conn.transaction():
            if vector is not None:
                await self._index(conn, len(vector))
            args = [memory_id, content, type, json.dumps(list(tags)), content_hash, self._clock()]
            await conn.execute(sql, *args, *self._vector_args(vector, model))
        return await self.get(memory_id, owner)

    async def set_vector(
        self, memory_id: str, vector: Sequence[float] | None, model: str | None
    ) -> None:
        columns, marks = self._vector_sql(2)
        sql = f"UPDATE {self.schema}.memories SET ({columns}) = ({marks}) WHERE id = $1"
        async with self._pool.acquire() as conn, conn.transaction():
            if vector is not None:
                await self._index(conn, len(vector))
            status = await conn.execute(sql, memory_id, *self._vector_args(vector, model))
        if status.endswith(" 0"):
            raise MemoryNotFoundError(memory_id)

    async def delete(self, memory_id: str, owner: Owner) -> Memory:
        memory = await self.get(memory_id, owner)
        async with self._pool.acquire() as conn:
            await conn.execute(f"DELETE FROM {self.schema}.memories WHERE id = $1", memory_id)
        return memory

    # --- reads --------------------------------------------------------------------

    async def get(self, memory_id: str, owner: Owner) -> Memory:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                f"SELECT {MEMORY_COLUMNS} FROM {self.schema}.memories WHERE id = $1", memory_id
            )
        if row is None or (owner is not ANY_OWNER and row[1] != owner):
            raise MemoryNotFoundError(memory_id)
        return decode_memory(row)

    async def find_hash(self, owner: str, content_hash: str) -> Memory | None:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                f"SELECT {MEMORY_COLUMNS} FROM {self.schema}.memories"
                " WHERE owner = $1 AND content_hash = $2",
                owner, content_hash,
            )  # fmt: skip
        return decode_memory(row) if row else None

    async def fetch(self, owner: str, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                f"SELECT {MEMORY_COLUMNS} FROM {self.schema}.memories"
                " WHERE owner = $1 AND id = ANY($2::text[])",
                owner, list(ids),
            )  # fmt: skip
        return [decode_memory(r) for r in rows]

    async def list_memories(
        self, owner: Owner, *, types: Sequence[str] | None = None,
        projects: Sequence[str] | None = None, limit: int = 100, offset: int = 0,
    ) -> list[Memory]:  # fmt: skip
        f = _Filters([])
        if owner is not ANY_OWNER:
            f.add("owner = ?", owner)
        f.types_projects(types, projects)
        n = len(f.args)
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM {self.schema}.memories WHERE true{f.sql}"
            f" ORDER BY updated_at DESC, id LIMIT ${n + 1} OFFSET ${n + 2}"
        )
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(sql, *f.args, limit, offset)
        return [decode_memory(r) for r in rows]

    async def count(self, owner: Owner) -> int:
        async with self._pool.acquire() as conn:
            if owner is ANY_OWNER:
                return int(await conn.fetchval(f"SELECT count(*) FROM {self.schema}.memories"))
            sql = f"SELECT count(*) FROM {self.schema}.memories WHERE owner = $1"
            return int(await conn.fetchval(sql, owner))

    async def _common_lexemes(
        self, conn: Any, analyzed: float | None = None
    ) -> tuple[dict[str, float], float]:
        """The lexemes ANALYZE found common in ``tsv``, with the share of rows holding
        each, and the rows it counted; read again when ``analyzed`` (``memory_terms``'s
        ``reltuples`` now) differs from what they were read with: ANALYZE ran since."""
        now = self._clock()
        if (self._common is None or now - self._common[0] > _COMMON_LEXEMES_TTL_S
                or (analyzed is not None and analyzed != self._common[2])):  # fmt: skip
            row = await conn.fetchrow(
                "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs,"
                " (SELECT reltuples FROM pg_class WHERE oid = $2::regclass)"
                " FROM (SELECT 1) one LEFT JOIN pg_stats s ON s.schemaname = $1"
                " AND s.tablename = 'memory_terms' AND s.attname = 'tsv'",
                self.schema, f"{self.schema}.memory_terms",
            )  # fmt: skip
            shares = dict(zip(row[0], row[1], strict=False)) if row[0] else {}
            self._common = (now, shares, float(row[2]))
        return self._common[1], max(self._common[2], 0.0)

    async def _choosing_rounds(self, conn: Any, terms: Sequence[str]) -> list[list[str]]:
        """The words that choose rows, round by round (:func:`ranking.choosing_rounds`).

        The planner's statistics are kept while ``reltuples`` stays as it was: a store
        that grew tenfold in minutes would otherwise be judged by its old size, and
        words in a few percent of it would choose (and thousands of rows be ranked).
        """
        found = await conn.fetch(
            "SELECT t, tsvector_to_array(to_tsvector('english', t)),"
            " (SELECT reltuples FROM pg_class WHERE oid = $2::regclass)"
            " FROM unnest($1::text[]) t",
            list(terms), f"{self.schema}.memory_terms",
        )  # fmt: skip
        shares, rows = await self._common_lexemes(conn, float(found[0][2]) if found else None)
        if not shares:
            return [list(terms)]
        return choosing_rounds({r[0]: list(r[1]) for r in found}, shares, rows)

    async def keyword_search(
        self, owner: str, terms: Sequence[str], limit: int, *,
        types: Sequence[str] | None = None, projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:  # fmt: skip
        if not terms:
            return []
        rows: list[Any] = []
        async with self._pool.acquire() as conn:
            # Rows are chosen by the query's selective words and ranked by all of them:
            # a word in most memories would otherwise have every one of them ranked
            # (a parallel scan of the table: the Postgres p99 of hundreds of ms).
            # ts_rank, not ts_rank_cd: a third of the cost a row, the same recall@5.
            for choosing in await self._choosing_rounds(conn, terms):
                f = _Filters([owner, " | ".join(choosing), " | ".join(terms)])
                f.types_projects(types, projects)
                s = self.schema
                join = f" JOIN {s}.memories m ON m.id = t.id" if f.sql else ""
                sql = (
                    f"SELECT t.id, ts_rank(t.tsv, r) AS rank FROM {s}.memory_terms t{join},"
                    " to_tsquery('english', $2) q, to_tsquery('english', $3) r"
                    f" WHERE t.owner = $1 AND t.tsv @@ q{f.sql} ORDER BY rank DESC, t.id"
                    f" LIMIT ${len(f.args) + 1}"
                )
                rows = await conn.fetch(sql, *f.args, limit)
                if len(rows) >= limit:
                    break
        return [ScoredId(r[0], float(r[1])) for r in rows]

    async def vector_search(
        self, owner: str, vector: Sequence[float], model: str, limit: int, *,
        types: Sequence[str] | None = None, projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:  # fmt: skip
        d = len(vector)
        f = _Filters([owner, model, d])
        f.types_projects(types, projects)
        where = f"owner = $1 AND embedding_model = $2 AND dimension = $3{f.sql}"
        async with self._pool.acquire() as conn:
            if self._vec is not None:
                scored = await self._vec.search(conn, where, f.args, vector, limit)
            else:
                rows = await conn.fetch(
                    f"SELECT id, embedding_array FROM {self.schema}.memories WHERE {where}", *f.args
                )
                scored = [ScoredId(r[0], cosine(vector, r[1])) for r in rows]
        scored.sort(key=lambda s: (-s.score, s.id))
        return scored[:limit]

    async def stale_vectors(
        self, model: str | None, dimension: int | None, limit: int
    ) -> list[Memory]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                f"SELECT {MEMORY_COLUMNS} FROM {self.schema}.memories WHERE embedding_model IS NULL"
                " OR embedding_model IS DISTINCT FROM $1 OR dimension IS DISTINCT FROM $2"
                " ORDER BY created_at, id LIMIT $3",
                model, dimension, limit,
            )  # fmt: skip
        return [decode_memory(r) for r in rows]

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": "postgres", "keyword": "full-text (ts_rank)"}
        if self._no_vec is None:
            out["vector_search"] = "pgvector-hnsw"
        else:
            out["vector_search"] = "scan"
            out["vector_search_reason"] = self._no_vec
        return out

    async def aclose(self) -> None:
        if not self._pool.is_closing():
            await self._pool.close()
