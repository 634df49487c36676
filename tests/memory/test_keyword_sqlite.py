"""SQLite keyword search: a word in most memories does not choose them, by its stem; the
owner found by its token or by index."""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.memory.base import ANY_OWNER, NewMemory
from exai.memory.ranking import content_hash, query_terms
from exai.memory.sqlite import SqliteMemoryStore
from exai.memory.sqlite_terms import owner_in_match


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


def test_the_owner_token_is_matched_unless_the_owner_holds_most_memories() -> None:
    assert owner_in_match(10, 1_000)  # one of many principals: only its rows are ranked
    assert owner_in_match(333, 1_000)
    assert not owner_in_match(334, 1_000)  # most of the store: rank the words, keep its own
    assert owner_in_match(0, 0)


async def test_either_way_of_finding_the_owner_gives_the_same_hits_and_scores(
    tmp_path: Path,
) -> None:
    store = await SqliteMemoryStore.open(tmp_path / "m.sqlite3")
    try:
        # alice holds most memories (her words are ranked among everyone's); bob and
        # carol a few each (their token goes into the MATCH).
        rows = [(memory("alice", f"alice note {i} on pipeline {i % 9} and ticket {i}"), None)
                for i in range(300)]  # fmt: skip
        rows += [(memory(who, f"{who} note {i} on pipeline {i % 9} and ticket {i}"), None)
                 for who in ("bob", "carol") for i in range(40)]  # fmt: skip
        await store.insert_many(rows, None)
        words = query_terms("pipeline 3 ticket 12")
        alice = await store.keyword_search("alice", words, 30)
        bob = await store.keyword_search("bob", words, 30)
        owners = {h.id: (await store.get(h.id, ANY_OWNER)).owner for h in alice + bob}
        assert {owners[h.id] for h in alice} == {"alice"}
        assert {owners[h.id] for h in bob} == {"bob"}
        # bob's best (ticket 12 on pipeline 3) scores as alice's does: the same
        # BM25 over the same words, whichever way the owner was found.
        assert (
            await store.get(bob[0].id, "bob")
        ).content == "bob note 12 on pipeline 3 and ticket 12"
        assert (await store.get(alice[0].id, "alice")).content.startswith("alice note 12 ")
        assert bob[0].score == pytest.approx(alice[0].score)
        # With a type filter the owner's token is matched whatever the owner holds.
        typed = await store.keyword_search("alice", words, 30, types=["fact"])
        assert [(h.id, h.score) for h in typed] == [(h.id, pytest.approx(h.score)) for h in alice]
    finally:
        await store.aclose()
