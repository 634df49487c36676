"""Resident vectors in the SQLite store: the same answers as the exact scan, kept in
step with the table whoever writes it, one principal's only, and the scan when
they cannot be used."""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
from pathlib import Path

import pytest

from exai.memory.base import NewMemory, ScoredId
from exai.memory.ranking import content_hash
from exai.memory.sqlite import SqliteMemoryStore
from tests.memory.conftest import vec

MODEL = "emu-embed"
WORDS = "deploy pipeline python sqlite review terse blue green store cache queue index".split()


def text(i: int) -> str:
    return f"{WORDS[i % 12]} {WORDS[(i * 5) % 12]} {WORDS[(i * 7 + 3) % 12]} note {i}"


async def fill(store: SqliteMemoryStore, owner: str, count: int, start: int = 0) -> None:
    rows = [(NewMemory(owner, text(i), ("fact", "rule")[i % 2], content_hash(text(i)),
                       project=("/a", None)[i % 2]), vec(text(i)))
            for i in range(start, start + count)]  # fmt: skip
    await store.insert_many(rows, MODEL)


async def resident(
    path: Path, min_vectors: int = 1, max_bytes: int = 1 << 30, inline_max: int = 20_000
) -> SqliteMemoryStore:
    return await SqliteMemoryStore.open(path, resident_min_vectors=min_vectors,
                                        resident_max_bytes=max_bytes,
                                        resident_inline_max=inline_max)  # fmt: skip


def same(got: list[ScoredId], want: list[ScoredId]) -> None:
    """The same scores, and the same memories but for ties at the cut."""
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    if want:
        cut = want[-1].score + 1e-5
        assert {h.id for h in got if h.score > cut} == {h.id for h in want if h.score > cut}


async def search(store: SqliteMemoryStore, query: str, limit: int = 10, **kw: object) -> list:
    return await store.vector_search("alice", vec(query), MODEL, limit, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def pair(tmp_path: Path):
    """A store with resident vectors and one that compares every vector (no sqlite-vec,
    whose search filters on type and project after it chose), on one file."""
    path = tmp_path / "memory.sqlite3"
    fast = await resident(path)
    exact = await SqliteMemoryStore.open(path, sqlite_vec=False, resident_min_vectors=None)
    yield fast, exact
    await fast.aclose()
    await exact.aclose()


async def test_resident_search_gives_the_exact_scans_answers(pair) -> None:
    fast, exact = pair
    await fill(fast, "alice", 300)
    await fill(fast, "bob", 100, start=1000)
    for query in ("deploy pipeline python", "terse review of the green store", "cache index 7"):
        same(await search(fast, query), await search(exact, query))
        for filters in (
            {"types": ["rule"]},
            {"projects": ["/b"]},
            {"types": ["fact"], "projects": ["/a"]},
        ):
            same(await search(fast, query, **filters), await search(exact, query, **filters))
    assert fast.status()["vector_resident"]["partitions"] == 1
    assert fast.status()["vector_resident"]["vectors"] == 300


async def test_one_principal_never_gets_anothers_vectors(pair) -> None:
    fast, _ = pair
    await fill(fast, "bob", 200)
    content = "alice prefers the blue pipeline"
    mine = await fast.insert(NewMemory("alice", content, "fact", content_hash(content)),
                             vec("x y z"), MODEL)  # fmt: skip
    found = await search(fast, text(3), limit=20)  # bob holds this very text
    assert [h.id for h in found] == [mine.id]
    assert await fast.vector_search("carol", vec(text(3)), MODEL, 5) == []


async def test_writes_of_another_connection_are_seen_without_reopening(pair) -> None:
    fast, other = pair  # the second store is what `exai memory` in another process is
    await fill(fast, "alice", 50)
    assert (await search(fast, "queue index sqlite"))[0].id  # loaded
    added = await other.insert(NewMemory("alice", "queue index sqlite", "fact",
                                         content_hash("queue index sqlite")),
                               vec("queue index sqlite"), MODEL)  # fmt: skip
    assert (await search(fast, "queue index sqlite"))[0].id == added.id
    await other.delete(added.id, "alice")
    assert added.id not in {h.id for h in await search(fast, "queue index sqlite", 60)}
    target = (await search(fast, text(7)))[0]
    await other.set_vector(target.id, vec("something else entirely"), MODEL)
    moved = await search(fast, "something else entirely")
    assert moved[0].id == target.id and moved[0].score == pytest.approx(1.0, abs=1e-5)
    await other.set_vector(target.id, None, None)
    assert target.id not in {h.id for h in await search(fast, "something else entirely", 60)}
    own = await fast.insert(NewMemory("alice", "own write", "fact", content_hash("own write")),
                            vec("own write"), MODEL)  # fmt: skip
    assert (await search(fast, "own write"))[0].id == own.id
    same(await search(fast, "deploy store"), await search(other, "deploy store"))


async def test_a_partition_the_change_log_no_longer_covers_is_read_again(pair, tmp_path) -> None:
    fast, other = pair
    await fill(fast, "alice", 40)
    await search(fast, "deploy")  # loaded, up to the log's last change
    await fill(other, "alice", 3, start=500)
    with sqlite3.connect(tmp_path / "memory.sqlite3") as db:  # as trimming past it would
        db.execute("DELETE FROM memory_vector_changes WHERE seq < (SELECT max(seq)"
                   " FROM memory_vector_changes)")  # fmt: skip
    for i in range(500, 503):
        assert (await search(fast, text(i)))[0].score == pytest.approx(1.0, abs=1e-5)
    same(await search(fast, "blue green"), await search(other, "blue green"))


async def test_a_large_partition_loads_in_the_background_while_the_scan_answers(
    tmp_path: Path,
) -> None:
    fast = await resident(tmp_path / "memory.sqlite3", inline_max=0)
    exact = await SqliteMemoryStore.open(tmp_path / "memory.sqlite3", resident_min_vectors=None)
    try:
        await fill(fast, "alice", 200)
        same(await search(fast, "python review"), await search(exact, "python review"))
        for _ in range(200):
            status = fast.status()["vector_resident"]
            if status["loading"] == 0:
                break
            await asyncio.sleep(0.05)
        same(await search(fast, "python review"), await search(exact, "python review"))
        assert fast.status()["vector_resident"]["partitions"] == 1
    finally:
        await fast.aclose()
        await exact.aclose()


async def test_the_loader_opens_the_file_with_the_stores_own_sqlite_library(
    tmp_path: Path,
) -> None:
    # Two copies of SQLite in one process on one file break each other's locks; the
    # background loader once used the standard library's next to the bundled
    # pysqlite3 and the process died of a bus error (tests below, now and then).
    store = await resident(tmp_path / "memory.sqlite3")
    try:
        library = type(store._thread.conn).__module__
        assert store._resident._connect is importlib.import_module(library).connect
    finally:
        await store.aclose()


async def test_few_vectors_or_too_little_memory_leave_it_to_the_scan(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    few = await resident(path, min_vectors=100)
    tight = await resident(path, max_bytes=1_000)
    try:
        await fill(few, "alice", 30)
        for store in (few, tight):
            assert len(await search(store, "deploy")) == 10
        assert few.status()["vector_resident"]["partitions"] == 0
        assert tight.status()["vector_resident"]["not_loaded"] == ["larger than the memory allowed"]
    finally:
        await few.aclose()
        await tight.aclose()


async def test_status_says_when_resident_vectors_are_off(tmp_path: Path) -> None:
    store = await SqliteMemoryStore.open(tmp_path / "m.sqlite3", resident_min_vectors=None)
    try:
        status = store.status()
        assert (status["vector_search"], status["vector_resident"]) == ("sqlite-vec", "off")
        assert status["vector_resident_reason"] == "turned off"
    finally:
        await store.aclose()
    with pytest.raises(ValueError, match="min_vectors >= 1"):
        await SqliteMemoryStore.open(tmp_path / "m.sqlite3", resident_min_vectors=0)
