"""SQLite keyword search: a word in most memories does not choose them, by its stem."""

from __future__ import annotations

from pathlib import Path

from exai.memory.base import NewMemory
from exai.memory.ranking import content_hash, query_terms
from exai.memory.sqlite import SqliteMemoryStore


def memory(owner: str, content: str) -> NewMemory:
    return NewMemory(owner, content, "fact", content_hash(content))


async def test_a_word_in_most_memories_chooses_none_of_them(tmp_path: Path) -> None:
    store = await SqliteMemoryStore.open(tmp_path / "m.sqlite3")
    try:
        # "deploying" is in 1,200 of 1,202 memories: common, by the stem "deploy".
        await store.insert_many([(memory("alice", f"deploying service number {i}"), None)
                                 for i in range(1_200)], None)  # fmt: skip
        rare = await store.insert(memory("alice", "the blue pipeline deploys at night"), None, None)
        other = await store.insert(memory("bob", "bob deploys the blue pipeline"), None, None)

        hits = await store.keyword_search("alice", query_terms("deploys blue pipeline"), 20)
        assert [h.id for h in hits] == [rare.id]
        # Only common words: the rarest one chooses, so something is still found.
        alone = await store.keyword_search("alice", query_terms("deploys"), 5)
        assert len(alone) == 5
        assert [h.id for h in await store.keyword_search("bob", ["deploys"], 5)] == [other.id]
        # A word the index has never seen chooses (and finds nothing).
        assert await store.keyword_search("alice", ["zyzzyva"], 5) == []
    finally:
        await store.aclose()


async def test_few_memories_keep_every_word(tmp_path: Path) -> None:
    store = await SqliteMemoryStore.open(tmp_path / "m.sqlite3")
    try:
        ids = [(await store.insert(memory("alice", f"deploying service {w}"), None, None)).id
               for w in ("alpha", "beta", "gamma")]  # fmt: skip
        hits = await store.keyword_search("alice", query_terms("deploys"), 10)
        assert {h.id for h in hits} == set(ids)  # in every memory, but only three of them
    finally:
        await store.aclose()


async def test_a_word_in_a_few_percent_chooses_only_when_the_rarer_ones_find_too_few(
    tmp_path: Path,
) -> None:
    store = await SqliteMemoryStore.open(tmp_path / "m.sqlite3")
    try:
        # "rollout" is in 1,100 of 25,000 memories: more than 1% and 1,000 of them.
        await store.insert_many([(memory("alice", f"rollout {i}" if i < 1_100 else f"entry {i}"),
                                  None) for i in range(25_000)], None)  # fmt: skip
        rare = await store.insert(memory("alice", "the rollout uses a canary stage"), None, None)
        hits = await store.keyword_search("alice", ["rollout", "canary"], 1)
        assert [h.id for h in hits] == [rare.id]
        hits = await store.keyword_search("alice", ["rollout", "canary"], 5)
        assert len(hits) == 5 and hits[0].id == rare.id
    finally:
        await store.aclose()
