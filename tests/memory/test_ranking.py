"""The pure decisions of memory: fusion, weights, recency, dedup, the block. No database."""

from __future__ import annotations

import pytest

from exai.memory.base import Memory, ScoredId
from exai.memory.block import BLOCK_END, BLOCK_START, build_block
from exai.memory.ranking import (
    RankingWeights,
    choosing_rounds,
    content_hash,
    dedup_action,
    fuse,
    query_terms,
    recency_factor,
    selective_terms,
)
from exai.settings.values import parse_type_weights
from exai.store.history import thread_system_prompt

NOW = 1_800_000_000.0
DAY = 86400.0


def mem(id: str, type: str = "fact", age_days: float = 0.0, content: str = "") -> Memory:
    t = NOW - age_days * DAY
    return Memory(id, "alice", content or f"memory {id}", type, [], None, "h" + id, "tool", t, t)


def test_fusion_rewards_agreement_and_drops_weak_vectors() -> None:
    memories = {m.id: m for m in (mem("a"), mem("b"), mem("c"))}
    keyword = [ScoredId("a", 9.0), ScoredId("b", 5.0)]
    vector = [ScoredId("b", 0.9), ScoredId("c", 0.5)]  # c is below min_similarity
    ranked = fuse(keyword, vector, memories, RankingWeights(min_similarity=0.7), NOW, 10)
    assert [r.memory.id for r in ranked] == ["b", "a"]
    assert (ranked[0].keyword_rank, ranked[0].similarity) == (2, 0.9)
    assert (
        fuse(keyword, vector, memories, RankingWeights(min_similarity=0.4), NOW, 1)[0].memory.id
        == "b"
    )


def test_type_weights_and_recency_reorder_equal_relevance() -> None:
    memories = {m.id: m for m in (mem("f", "fact"), mem("r", "rule"), mem("old", "rule", 365))}
    hits = [ScoredId("f", 1.0), ScoredId("r", 1.0), ScoredId("old", 1.0)]
    # Equal RRF input is impossible (ranks differ), so give rules the worse ranks.
    ranked = fuse(hits, [], memories, RankingWeights(), NOW, 10)
    assert ranked[0].memory.id == "r"  # rank 2 x 1.5 beats rank 1 x 1.0
    assert recency_factor(NOW, NOW, 90, 0.5) == 1.0
    assert recency_factor(NOW - 90 * DAY, NOW, 90, 0.5) == pytest.approx(0.75)
    assert recency_factor(NOW - 10_000 * DAY, NOW, 90, 0.5) == pytest.approx(0.5)
    assert recency_factor(NOW - 10 * DAY, NOW, 0, 0.5) == 1.0


def test_dedup_decisions() -> None:
    assert dedup_action(True, ScoredId("x", 1.0), 0.95) == ("duplicate", None)
    assert dedup_action(False, ScoredId("x", 0.96), 0.95) == ("update", "x")
    assert dedup_action(False, ScoredId("x", 0.94), 0.95) == ("insert", None)
    assert dedup_action(False, None, 0.95) == ("insert", None)
    assert dedup_action(False, ScoredId("x", 1.0), 1.01) == ("insert", None)
    assert content_hash(" The  Repo ") == content_hash("the repo")


def test_query_terms_are_plain_words() -> None:
    assert query_terms('What does "this" repo target? OR NEAR(x) *') == ["repo", "target", "near"]
    assert query_terms("3 a") == ["3"]


def test_common_words_rank_but_do_not_choose() -> None:
    lexemes = {"deploys": ["deploy"], "canary": ["canari"], "the": [], "week": ["week"]}
    shares = {"deploy": 0.9, "week": 0.3, "canari": 0.01}
    assert selective_terms(lexemes, shares, 100_000) == ["canary"]
    assert selective_terms({"deploys": ["deploy"], "week": ["week"]}, shares, 100_000) == ["week"]
    assert selective_terms(lexemes, {}, 100_000) == ["deploys", "canary", "week"]  # no statistics
    assert selective_terms({"the": []}, shares, 100_000) == []
    # A small store ranks every match, however common the word: it is cheap there.
    assert selective_terms(lexemes, shares, 1_000) == ["deploys", "canary", "week"]


def test_words_in_a_few_percent_choose_only_when_the_rarer_ones_choose_too_few() -> None:
    lexemes = {"deploys": ["deploy"], "canary": ["canari"], "week": ["week"]}
    shares = {"deploy": 0.9, "week": 0.03, "canari": 0.002}
    assert choosing_rounds(lexemes, shares, 100_000) == [["canary"], ["canary", "week"]]
    assert choosing_rounds({"week": ["week"], "canary": ["canari"]}, {"canari": 0.002},
                           100_000) == [["week", "canary"]]  # fmt: skip
    # Every word in a few percent: the rarest first, then all of them.
    few = {"week": 0.03, "canari": 0.02}
    assert choosing_rounds(lexemes, few | {"deploy": 0.04}, 100_000) == [
        ["canary"], ["deploys", "canary", "week"]]  # fmt: skip
    assert choosing_rounds({"deploys": ["deploy"]}, shares, 100_000) == [["deploys"]]
    assert choosing_rounds({"the": []}, shares, 100_000) == []
    assert choosing_rounds(lexemes, shares, 20_000) == [["canary", "week"]]  # 600 rows: cheap


def test_type_weights_setting() -> None:
    assert parse_type_weights("rule=1.5, decision=1.3") == {"rule": 1.5, "decision": 1.3}
    for bad in ("rule", "rule=-1", "=2", "rule=x"):
        with pytest.raises(ValueError):
            parse_type_weights(bad)


def test_block_keeps_to_budget_and_is_deterministic() -> None:
    memories = [mem("1", "rule", content="x " * 300), mem("2", content="short one"),
                mem("3", content="another short")]  # fmt: skip
    count = len  # one token per character: easy to reason about
    block = build_block(memories, 500, count)
    assert block is not None and block.ids == ["2", "3"]  # the long one skipped, not the rest
    assert block.text.startswith(BLOCK_START) and block.text.endswith(BLOCK_END)
    assert block.tokens == len(block.text) <= 500
    assert build_block(memories, 500, count) == block
    assert build_block(memories, 10, count) is None
    assert build_block([], 500, count) is None
    assert thread_system_prompt("tool", block.text) == "tool\n\n" + block.text
    assert thread_system_prompt("tool", None) == "tool"
    assert thread_system_prompt(None, "b") == "b"
