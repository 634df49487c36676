"""Postgres keyword search: its own table of words, and words too common to choose rows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

from exai.emulators.postgres import TempPostgres
from exai.memory.postgres import PostgresMemoryStore
from exai.memory.ranking import content_hash
from exai.memory.schema import POSTGRES_MIGRATIONS
from exai.sqldb.migrations import apply_migrations
from tests.memory.test_contract import MODEL, add, new

PG_BACKENDS = ["pg-vector", "pg-scan"]


def _server(request: pytest.FixtureRequest, backend: str) -> TempPostgres:
    name = "pgvector_server" if backend == "pg-vector" else "postgres_server"
    server: TempPostgres = request.getfixturevalue(name)
    return server


@asynccontextmanager
async def _fresh_store(
    request: pytest.FixtureRequest, backend: str, **options: int
) -> AsyncIterator[tuple[PostgresMemoryStore, asyncpg.Connection, str]]:
    """A store in a schema of its own (``options`` to its ``open``), and a connection of
    the test's to ``ANALYZE`` its words (what autovacuum does) as the store grows."""
    server = _server(request, backend)
    schema = f"m_{uuid.uuid4().hex[:16]}"
    store = await PostgresMemoryStore.open(server.url, schema=schema, max_size=2, **options)
    conn = await asyncpg.connect(server.url)
    try:
        yield store, conn, schema
    finally:
        await conn.close()
        await store.aclose()


@pytest.mark.parametrize("backend", PG_BACKENDS)
async def test_a_store_of_the_first_version_is_migrated_with_its_words(
    backend: str, request: pytest.FixtureRequest
) -> None:
    server = _server(request, backend)
    schema = f"m_{uuid.uuid4().hex[:16]}"
    conn = await asyncpg.connect(server.url)
    try:
        async with conn.transaction():
            await apply_migrations(conn, schema, "memory", "memory_schema_version",
                                   POSTGRES_MIGRATIONS[:1])  # fmt: skip
        for owner, text in (("alice", "alice deploys with the blue pipeline"),
                            ("bob", "bob deploys with the green pipeline")):  # fmt: skip
            await conn.execute(
                f"INSERT INTO {schema}.memories (id, owner, type, content, tags, content_hash,"
                " source, created_at, updated_at) VALUES ($1, $2, 'fact', $3, '[]', $4,"
                " 'tool', 0, 0)",
                f"{owner}-old", owner, text, content_hash(text),
            )  # fmt: skip
    finally:
        await conn.close()
    store = await PostgresMemoryStore.open(server.url, schema=schema, max_size=2)
    try:
        async with store._pool.acquire() as conn:
            words = await conn.fetchval(f"SELECT count(*) FROM {schema}.memory_terms")
        assert words == 2  # each memory's words backfilled into their own table
        hits = await store.keyword_search("alice", ["pipeline", "deploys"], 5)
        assert [h.id for h in hits] == ["alice-old"]  # and still alice's only
        text = "alice deploys with the red pipeline now"
        await store.update("alice-old", "alice", content=text, type="fact", tags=[],
                           content_hash=content_hash(text), vector=None, model=None)  # fmt: skip
        assert await store.keyword_search("alice", ["blue"], 5) == []
        assert [h.id for h in await store.keyword_search("alice", ["red"], 5)] == ["alice-old"]
        await store.delete("alice-old", "alice")
        assert await store.keyword_search("alice", ["pipeline"], 5) == []
        assert [h.id for h in await store.keyword_search("bob", ["pipeline"], 5)] == ["bob-old"]
    finally:
        await store.aclose()


@pytest.mark.parametrize("backend", PG_BACKENDS)
async def test_a_word_in_most_memories_ranks_but_does_not_choose(
    backend: str, request: pytest.FixtureRequest
) -> None:
    async with _fresh_store(request, backend) as (store, conn, schema):
        # More than COMMON_TERM_ROWS memories hold the common word.
        crowd = [(new("alice", f"deployment note number {i} of the week"), None)
                 for i in range(1_100)]  # fmt: skip
        await store.insert_many(crowd, MODEL)
        rare = await add(store, "alice", "the deployment uses a canary stage")
        other = await add(store, "bob", "a canary deployment for bob")
        await conn.execute(f"ANALYZE {schema}.memory_terms")
        hits = await store.keyword_search("alice", ["deployment", "canary"], 10)
        assert [h.id for h in hits] == [rare]  # the notes hold only the common word
        only_common = await store.keyword_search("alice", ["deployment", "week"], 10)
        assert len(only_common) == 10 and other not in {h.id for h in only_common}
        assert [h.id for h in await store.keyword_search("bob", ["deployment"], 10)] == [other]


@pytest.mark.parametrize("backend", PG_BACKENDS)
async def test_a_word_in_a_few_percent_chooses_only_when_the_rarer_ones_find_too_few(
    backend: str, request: pytest.FixtureRequest
) -> None:
    async with _fresh_store(request, backend) as (store, conn, schema):
        # "rollout" is in 1,100 of 25,000 memories: more than 1% and 1,000 of them.
        crowd = [(new("alice", f"rollout {i}" if i < 1_100 else f"entry {i}"), None)
                 for i in range(25_000)]  # fmt: skip
        await store.insert_many(crowd, MODEL)
        rare = await add(store, "alice", "the rollout uses a canary stage")
        await conn.execute(f"ANALYZE {schema}.memory_terms")
        assert [h.id for h in await store.keyword_search("alice", ["rollout", "canary"], 1)] == [
            rare]  # fmt: skip
        # Fewer than wanted from "canary": "rollout" chooses too, and the memory holding
        # both still ranks first.
        hits = await store.keyword_search("alice", ["rollout", "canary"], 5)
        assert len(hits) == 5 and hits[0].id == rare


@pytest.mark.parametrize("backend", PG_BACKENDS)
async def test_statistics_are_read_again_once_analyze_has_counted_a_grown_store(
    backend: str, request: pytest.FixtureRequest
) -> None:
    async with _fresh_store(request, backend) as (store, conn, schema):
        await store.insert_many([(new("alice", f"entry {i}"), None) for i in range(10)], MODEL)
        await conn.execute(f"ANALYZE {schema}.memory_terms")
        assert await store.keyword_search("alice", ["entry"], 5)  # statistics read: 10 rows
        crowd = [(new("alice", f"deployment note {i}"), None) for i in range(1_200)]
        await store.insert_many(crowd, MODEL)
        rare = await add(store, "alice", "the deployment uses a canary stage")
        await conn.execute(f"ANALYZE {schema}.memory_terms")
        hits = await store.keyword_search("alice", ["deployment", "canary"], 10)
        assert [h.id for h in hits] == [rare]  # "deployment" is common now, not by the old counts
