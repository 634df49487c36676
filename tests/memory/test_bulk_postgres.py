"""Bulk loads into the Postgres store: when the search indexes are built after the load,
and that the memories loaded either way are found by both searches."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import asyncpg
import pytest

from exai.memory.postgres import PostgresMemoryStore
from exai.memory.postgres_import import BUILD_MEMORY_MAX, build_memory, rebuilds_indexes
from tests.memory.conftest import vec
from tests.memory.test_contract import MODEL, new
from tests.memory.test_keyword_postgres import PG_BACKENDS, _fresh_store


def test_a_batch_rebuilds_the_indexes_when_it_is_large_and_at_least_what_is_stored() -> None:
    assert rebuilds_indexes(10_000, 0)
    assert rebuilds_indexes(900_000, 100_000)
    assert rebuilds_indexes(50_000, 50_000)
    assert not rebuilds_indexes(9_999, 0)  # small: into the kept indexes
    assert not rebuilds_indexes(50_000, 50_001)  # the build would read more than twice
    assert rebuilds_indexes(5, 3, minimum=5)


def test_the_build_memory_follows_the_rows_up_to_a_cap() -> None:
    assert build_memory(10, 256) == 64 * 1024**2  # never below Postgres' default
    assert build_memory(100_000, 256) == 100_000 * (256 * 4 + 1024)
    assert build_memory(10_000_000, 1536) == BUILD_MEMORY_MAX


def _store(
    request: pytest.FixtureRequest, backend: str
) -> AbstractAsyncContextManager[tuple[PostgresMemoryStore, asyncpg.Connection, str]]:
    """A fresh store whose batches of 40 or more count as bulk loads."""
    return _fresh_store(request, backend, bulk_min=40)


async def _indexes(conn: asyncpg.Connection, schema: str) -> dict[str, int]:
    """The schema's HNSW and GIN indexes by name, with their oids (new after a rebuild)."""
    rows = await conn.fetch(
        "SELECT c.relname, c.oid::bigint FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam"
        " WHERE n.nspname = $1 AND a.amname IN ('hnsw', 'gin')",
        schema,
    )  # fmt: skip
    return {r[0]: r[1] for r in rows}


def _rows(owner: str, start: int, stop: int) -> list[tuple[object, list[float]]]:
    texts = [f"{owner} note {i} about pipeline {i % 7} and ticket {i}" for i in range(start, stop)]
    return [(new(owner, t), vec(t)) for t in texts]


@pytest.mark.parametrize("backend", PG_BACKENDS)
async def test_a_large_batch_is_loaded_with_its_indexes_built_again_after(
    backend: str, request: pytest.FixtureRequest
) -> None:
    async with _store(request, backend) as (store, conn, schema):
        assert await store.insert_many(_rows("alice", 0, 10), MODEL) == 10  # below bulk_min
        before = await _indexes(conn, schema)
        rows = _rows("alice", 10, 60)
        assert await store.insert_many(rows + rows[:5] + _rows("alice", 0, 3), MODEL) == 50
        after = await _indexes(conn, schema)
        assert set(after) == set(before)  # the same indexes, from the same definitions
        assert all(after[name] != oid for name, oid in before.items())  # built again
        # The load analysed the tables, so the keyword search judges words by the new size.
        analysed = await conn.fetchval(
            "SELECT reltuples FROM pg_class WHERE oid = $1::regclass", f"{schema}.memory_terms"
        )
        assert analysed == 60
        assert await store.count("alice") == 60
        text = "alice note 42 about pipeline 0 and ticket 42"
        hit = (await store.vector_search("alice", vec(text), MODEL, 1))[0]
        assert (await store.get(hit.id, "alice")).content == text
        found = await store.keyword_search("alice", ["ticket", "42"], 5)
        assert (await store.get(found[0].id, "alice")).content == text


@pytest.mark.parametrize("backend", PG_BACKENDS)
async def test_a_batch_smaller_than_the_store_goes_into_the_kept_indexes(
    backend: str, request: pytest.FixtureRequest
) -> None:
    async with _store(request, backend) as (store, conn, schema):
        assert await store.insert_many(_rows("alice", 0, 100), MODEL) == 100
        before = await _indexes(conn, schema)
        assert await store.insert_many(_rows("bob", 0, 60), MODEL) == 60  # 60 < 100 stored
        assert await _indexes(conn, schema) == before
        text = "bob note 7 about pipeline 0 and ticket 7"
        hit = (await store.vector_search("bob", vec(text), MODEL, 1))[0]
        assert (await store.get(hit.id, "bob")).content == text
        assert (await store.vector_search("alice", vec(text), MODEL, 1))[0].id != hit.id
