"""Bulk loading the Postgres memory store: COPY through a staging table, indexes built after.

pgvector's advice for a bulk load is ``COPY`` and the indexes added after the
data. Kept up to date row by row, every memory costs an HNSW insert (a search of
the graph and its write-ahead-logged page changes) and a GIN insert for each of
its words: 4 to 6 minutes per 100,000 memories of 256 dimensions. Built once
from all the rows, the HNSW graph is made in memory by parallel workers and the
GIN index from sorted entries.

So a batch large against what is stored (:func:`rebuilds_indexes`) drops the
memory tables' search indexes, copies its rows in, and builds the indexes again
from their own definitions (``pg_get_indexdef``: the migrations stay the one
place that says what they are), all in the load's transaction. Dropping an index
locks the table until the commit: a recall on another connection waits for the
load instead of finding no index and scanning a million rows. A smaller batch
goes through the same staging table into the kept indexes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Final

from exai.memory.base import NewMemory

__all__ = [
    "BUILD_MEMORY_MAX",
    "BULK_MIN_ROWS",
    "build_memory",
    "copy_memories",
    "rebuilds_indexes",
]  # fmt: skip

# Below this a batch goes into the kept indexes: rebuilding them costs more than
# inserting a few thousand rows, whatever the table holds.
BULK_MIN_ROWS: Final = 10_000
# maintenance_work_mem is raised for the build to what the graph needs, to at
# most this: an HNSW graph that outgrows it is finished on disk, row by row.
BUILD_MEMORY_MAX: Final = 2 * 1024**3
# A load's statements are bounded by the server, not by the pool's command timeout
# (60 s, for queries): copying and indexing a million memories takes minutes.
_LOAD_TIMEOUT_S: Final = 6 * 3600.0
_STAGING_COLUMNS = ("id", "owner", "project", "type", "content", "tags", "content_hash",
                    "source", "created_at", "embedding_model", "dimension",
                    "embedding_array")  # fmt: skip


def rebuilds_indexes(batch: int, stored: int, minimum: int = BULK_MIN_ROWS) -> bool:
    """Whether loading ``batch`` rows into a table of ``stored`` drops and rebuilds its
    indexes: when the batch is at least ``minimum`` and at least as many rows as are
    stored, so the build reads at most twice the rows the batch brings."""
    return batch >= minimum and batch >= stored


def build_memory(rows: int, dimension: int | None) -> int:
    """Bytes of maintenance_work_mem an HNSW build of ``rows`` vectors wants: the
    vector and about a kilobyte of graph (neighbour lists at m = 16) per element."""
    per_row = (dimension or 0) * 4 + 1024
    return min(BUILD_MEMORY_MAX, max(64 * 1024**2, rows * per_row))


def _records(
    memories: Sequence[tuple[NewMemory, Sequence[float] | None]], model: str | None, now: float
) -> Iterator[tuple[Any, ...]]:
    for m, v in memories:
        yield (str(uuid.uuid4()), m.owner, m.project, m.type, m.content, json.dumps(m.tags),
               m.content_hash, m.source, now, model if v is not None else None,
               len(v) if v is not None else None,
               [float(x) for x in v] if v is not None else None)  # fmt: skip


async def _search_indexes(conn: Any, schema: str) -> list[tuple[str, str]]:
    """The memory tables' HNSW and GIN indexes: (name, definition)."""
    rows = await conn.fetch(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x"
        " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
        " JOIN pg_namespace n ON n.oid = t.relnamespace JOIN pg_am a ON a.oid = i.relam"
        " WHERE n.nspname = $1 AND t.relname IN ('memories', 'memory_terms')"
        " AND a.amname IN ('hnsw', 'gin')",
        schema,
    )  # fmt: skip
    return [(str(r[0]), str(r[1])) for r in rows]


async def copy_memories(
    conn: Any, schema: str, memories: Sequence[tuple[NewMemory, Sequence[float] | None]],
    model: str | None, now: float, *, pgvector: bool, rebuild: bool,
) -> int:  # fmt: skip
    """Store ``memories`` (hash duplicates skipped) inside the caller's transaction;
    with ``rebuild``, the search indexes are dropped first and built again after.
    Returns how many were stored."""
    await conn.execute(
        "CREATE TEMP TABLE memory_import (id text, owner text, project text, type text,"
        " content text, tags text, content_hash text, source text, created_at float8,"
        " embedding_model text, dimension integer, embedding_array real[]) ON COMMIT DROP"
    )
    await conn.copy_records_to_table("memory_import", records=_records(memories, model, now),
                                     columns=_STAGING_COLUMNS,
                                     timeout=_LOAD_TIMEOUT_S)  # fmt: skip
    indexes = await _search_indexes(conn, schema) if rebuild else []
    for name, _ in indexes:
        await conn.execute(f'DROP INDEX {schema}."{name}"')
    vector = ", embedding" if pgvector else ""
    cast = ", embedding_array::vector" if pgvector else ""
    status = await conn.execute(
        f"INSERT INTO {schema}.memories (id, owner, project, type, content, tags, content_hash,"
        f" source, created_at, updated_at, embedding_model, dimension, embedding_array{vector})"
        " SELECT id, owner, project, type, content, tags::jsonb, content_hash, source,"
        f" created_at, created_at, embedding_model, dimension, embedding_array{cast}"
        " FROM memory_import ON CONFLICT (owner, content_hash) DO NOTHING",
        timeout=_LOAD_TIMEOUT_S,
    )
    await conn.execute("DROP TABLE memory_import")
    if indexes:
        rows = int(await conn.fetchval(f"SELECT count(*) FROM {schema}.memories",
                                       timeout=_LOAD_TIMEOUT_S))  # fmt: skip
        dimension = next((len(v) for _, v in memories if v is not None), None)
        wanted = build_memory(rows, dimension)
        have = int(await conn.fetchval(
            "SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'"
        ))  # fmt: skip
        if wanted > have:
            await conn.execute(f"SET LOCAL maintenance_work_mem = '{wanted // 1024}kB'")
        for _, definition in indexes:
            await conn.execute(definition, timeout=_LOAD_TIMEOUT_S)
        # The planner's statistics (and the keyword search's choice of words) would
        # otherwise judge the grown table by its old size until autovacuum came by.
        await conn.execute(f"ANALYZE {schema}.memories; ANALYZE {schema}.memory_terms",
                           timeout=_LOAD_TIMEOUT_S)  # fmt: skip
    return int(status.rsplit(" ", 1)[1])
