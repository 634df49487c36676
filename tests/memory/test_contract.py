"""The memory store contract, on SQLite and Postgres, with and without vector indexes."""

from __future__ import annotations

import pytest

from exai.memory.base import ANY_OWNER, MemoryNotFoundError, MemoryStore, NewMemory
from exai.memory.ranking import content_hash, query_terms
from tests.memory.conftest import MemoryFactory, vec

MODEL = "emu-embed"


def new(owner: str, content: str, type: str = "fact", project: str | None = None) -> NewMemory:
    return NewMemory(owner, content, type, content_hash(content), ["t"], project)


async def add(store: MemoryStore, owner: str, content: str, **kw: str | None) -> str:
    memory = await store.insert(new(owner, content, **kw), vec(content), MODEL)  # type: ignore[arg-type]
    return memory.id


async def test_status_names_the_vector_path(memory_store: MemoryStore, memory_backend: str) -> None:
    status = memory_store.status()
    expected = {"sqlite": "sqlite-vec", "sqlite-scan": "scan", "pg-vector": "pgvector-hnsw",
                "pg-scan": "scan"}[memory_backend]  # fmt: skip
    assert status["vector_search"] == expected
    if memory_backend == "pg-scan":
        assert "CREATE EXTENSION vector failed" in status["vector_search_reason"]


async def test_store_read_list_delete_and_hash_dedup(memory_store: MemoryStore) -> None:
    first = await memory_store.insert(new("alice", "The repo targets Python 3.11"), vec("x"), MODEL)
    again = await memory_store.insert(new("alice", "the repo  targets python 3.11"), None, None)
    assert again.id == first.id  # same content by hash: stored once
    assert await memory_store.count("alice") == 1
    got = await memory_store.get(first.id, "alice")
    assert (got.content, got.embedding_model, got.dimension) == (
        "The repo targets Python 3.11", MODEL, 64)  # fmt: skip
    assert [m.id for m in await memory_store.list_memories("alice")] == [first.id]
    await memory_store.delete(first.id, "alice")
    with pytest.raises(MemoryNotFoundError):
        await memory_store.get(first.id, "alice")
    assert await memory_store.keyword_search("alice", ["python"], 5) == []
    assert await memory_store.vector_search("alice", vec("x"), MODEL, 5) == []


async def test_two_principals_never_meet(memory_store: MemoryStore) -> None:
    secret = await add(memory_store, "alice", "alice deploys with the blue pipeline")
    mine = await add(memory_store, "bob", "bob deploys with the green pipeline")
    same_a = await add(memory_store, "alice", "we chose SQLite for the store")
    same_b = await add(memory_store, "bob", "we chose SQLite for the store")
    assert same_a != same_b  # the same content is each principal's own memory
    for call in (memory_store.get(secret, "bob"), memory_store.delete(secret, "bob")):
        with pytest.raises(MemoryNotFoundError) as info:
            await call
        assert info.value.details == {"reason": "memory_not_found", "id": secret}
    assert (await memory_store.get(secret, "alice")).content.startswith("alice")  # not deleted
    terms = query_terms("deploys pipeline blue")
    assert {h.id for h in await memory_store.keyword_search("bob", terms, 10)} == {mine}
    hits = await memory_store.vector_search("bob", vec("alice blue pipeline"), MODEL, 10)
    assert secret not in {h.id for h in hits} and mine in {h.id for h in hits}
    assert await memory_store.fetch("bob", [secret, mine]) == [await memory_store.get(mine, "bob")]
    assert {m.id for m in await memory_store.list_memories("bob")} == {mine, same_b}
    assert await memory_store.count(ANY_OWNER) == 4


async def test_keyword_and_vector_search_rank_and_filter(memory_store: MemoryStore) -> None:
    py = await add(memory_store, "alice", "this repo targets Python 3.11", type="rule")
    db = await add(memory_store, "alice", "we chose SQLite for the conversation store",
                   type="decision")  # fmt: skip
    proj = await add(memory_store, "alice", "use tabs in the Makefile", project="/src/a")
    kw = await memory_store.keyword_search("alice", query_terms("which Python version?"), 5)
    assert kw[0].id == py
    near = await memory_store.vector_search("alice", vec("SQLite store choice"), MODEL, 3)
    assert near[0].id == db and near[0].score > near[-1].score
    assert -1.0 <= near[-1].score <= 1.0001
    only = await memory_store.keyword_search("alice", ["sqlite", "python"], 5, types=["rule"])
    assert [h.id for h in only] == [py]
    for projects, expected in (([], {py, db}), (["/src/a"], {py, db, proj}), (["/b"], {py, db})):
        found = await memory_store.list_memories("alice", projects=projects)
        assert {m.id for m in found} == expected
    scoped = await memory_store.vector_search("alice", vec("tabs Makefile"), MODEL, 5, projects=[])
    assert proj not in {h.id for h in scoped}


async def test_update_moves_text_and_vector(memory_store: MemoryStore) -> None:
    memory_id = await add(memory_store, "alice", "reviews should be verbose")
    text = "reviews should be terse"
    updated = await memory_store.update(
        memory_id, "alice", content=text, type="preference", tags=["style"],
        content_hash=content_hash(text), vector=vec(text), model=MODEL,
    )  # fmt: skip
    assert (updated.content, updated.type, updated.tags) == (text, "preference", ["style"])
    assert await memory_store.keyword_search("alice", ["verbose"], 5) == []
    assert [h.id for h in await memory_store.keyword_search("alice", ["terse"], 5)] == [memory_id]
    hits = await memory_store.vector_search("alice", vec(text), MODEL, 1)
    assert hits[0].id == memory_id and hits[0].score > 0.999
    with pytest.raises(MemoryNotFoundError):
        await memory_store.update(
            memory_id, "bob", content="x", type="fact", tags=[], content_hash="h",
            vector=None, model=None,
        )  # fmt: skip


async def test_vectors_of_another_model_are_stale_and_not_compared(
    memory_store: MemoryStore,
) -> None:
    old = await memory_store.insert(new("alice", "old model memory"), vec("old"), "model-a")
    bare = await memory_store.insert(new("alice", "no vector yet"), None, None)
    assert await memory_store.vector_search("alice", vec("old"), "model-b", 5) == []
    stale = await memory_store.stale_vectors("model-b", 64, 10)
    assert {m.id for m in stale} == {old.id, bare.id}
    await memory_store.set_vector(old.id, vec("old"), "model-b")
    await memory_store.set_vector(bare.id, vec("no vector"), "model-b")
    assert await memory_store.stale_vectors("model-b", 64, 10) == []
    assert (await memory_store.vector_search("alice", vec("old"), "model-b", 1))[0].id == old.id


async def test_insert_many_skips_duplicates(memory_store: MemoryStore) -> None:
    rows = [(new("alice", f"memory number {i}"), vec(f"memory number {i}")) for i in range(20)]
    assert await memory_store.insert_many(rows + rows[:5], MODEL) == 20
    assert await memory_store.count("alice") == 20
    hits = await memory_store.vector_search("alice", vec("memory number 7"), MODEL, 1)
    assert (await memory_store.get(hits[0].id, "alice")).content == "memory number 7"


async def test_extraction_queue_survives_reopen_and_leases(memory_factory: MemoryFactory) -> None:
    store = await memory_factory()
    job_id = await store.extraction.enqueue("alice", "I prefer pytest", "t1", None)
    await store.aclose()
    store = await memory_factory()  # a restart
    assert await store.extraction.pending() == 1
    job = await store.extraction.claim(lease_s=60)
    assert job is not None and (job.id, job.owner, job.attempts) == (job_id, "alice", 1)
    assert await store.extraction.claim(lease_s=60) is None  # leased
    await store.extraction.finish(job.id, "model said no JSON", max_attempts=2)
    again = await store.extraction.claim(lease_s=60)
    assert again is not None and again.attempts == 2
    await store.extraction.finish(again.id, "still no JSON", max_attempts=2)
    assert await store.extraction.pending() == 0


async def test_a_principal_with_few_memories_among_many_gets_all_of_theirs(
    memory_store: MemoryStore,
) -> None:
    # An approximate index that filtered after its nearest-candidate search
    # would come back short for the principal with few memories.
    crowd = [
        (new("bob", f"bob note {i} about deployment"), vec(f"bob note {i}")) for i in range(300)
    ]
    await memory_store.insert_many(crowd, MODEL)
    mine = {await add(memory_store, "alice", f"alice fact {w}") for w in ("red", "green", "blue")}
    hits = await memory_store.vector_search("alice", vec("bob note 7 about deployment"), MODEL, 10)
    assert {h.id for h in hits} == mine
