"""Pure decisions of memory retrieval and dedup: no database, no clock, no I/O.

Retrieval is hybrid. A keyword search (BM25 in SQLite's FTS5, ``ts_rank`` in
Postgres) and a vector search (cosine similarity) each return a ranked list;
:func:`fuse` merges them with reciprocal rank fusion, which needs no common
scale between BM25 and cosine, then multiplies by the memory's type weight
(a ``rule`` outranks a ``fact`` of equal relevance) and by its recency. Vector
hits below ``min_similarity`` are left out: nearness that weak is noise.

Dedup: the same content (by :func:`content_hash`) is never stored twice, and a
new memory whose cosine similarity to an existing one reaches the threshold
replaces that memory's content instead of adding another (:func:`dedup_action`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from exai.memory.base import Memory, ScoredId

__all__ = [
    "COMMON_TERM_ROWS",
    "COMMON_TERM_SHARE",
    "DEFAULT_TYPE_WEIGHTS",
    "NARROW_TERM_SHARE",
    "Ranked",
    "RankingWeights",
    "choosing_rounds",
    "content_hash",
    "cosine",
    "dedup_action",
    "fuse",
    "normalize_content",
    "normalize_vector",
    "query_terms",
    "recency_factor",
    "selective_terms",
]

DEFAULT_TYPE_WEIGHTS: Final[dict[str, float]] = {"rule": 1.5, "decision": 1.3, "preference": 1.2}
_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_MAX_TERMS = 32
# Words that match nearly every memory: kept out of keyword queries so that an OR
# of the query's words stays selective.
_STOPWORDS: Final = frozenset(
    "a an and are as at be by do does did for from has have how i in is it its me my of on "
    "or our so that the their them then there these they this to us was we were what when "
    "where which who why will with you your".split()
)
_DAY_S = 86400.0


def normalize_content(text: str) -> str:
    """Content as stored: outer whitespace stripped, inner runs made one space."""
    return _SPACE.sub(" ", text).strip()


def content_hash(text: str) -> str:
    """SHA-256 of the content ignoring case and spacing: what "the same content" means."""
    return hashlib.sha256(normalize_content(text).casefold().encode()).hexdigest()


def query_terms(text: str) -> list[str]:
    """The distinct words of a query worth searching for, in order, lower-cased.

    Plain words only, so no query can use (or break) FTS5's or tsquery's syntax.
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.casefold()):
        if word not in _STOPWORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
        if len(seen) >= _MAX_TERMS:
            break
    return list(seen)


# A query word whose lexeme is in more than this share of the memories, and in
# more than this many of them (by the database's own statistics), narrows
# nothing: BM25 gives such a word almost no weight, and ranking the tens of
# thousands of rows it matches is what a keyword search spends its time on. The
# count keeps small stores as they were: ranking a thousand rows is cheap.
COMMON_TERM_SHARE: Final = 0.05
COMMON_TERM_ROWS: Final = 1_000


def selective_terms(
    lexemes: Mapping[str, Sequence[str]], shares: Mapping[str, float], rows: float,
    common_share: float = COMMON_TERM_SHARE, common_rows: float = COMMON_TERM_ROWS,
) -> list[str]:  # fmt: skip
    """The query words that choose which memories a keyword search ranks.

    ``lexemes``: each query word (in query order) and the lexemes the search
    engine makes of it; ``shares``: the share of the ``rows`` rows holding a
    lexeme, for the lexemes the database counts as common (any other is rare). A
    word is common when one of its lexemes is in more than ``common_share`` of
    the rows and more than ``common_rows`` of them; common words still count in
    the rank of the memories chosen, they just cannot choose one alone. When
    every word is common, the rarest one chooses. A word with no lexeme (a
    stopword of the engine) chooses nothing.
    """

    def share(word: str) -> float:
        return max((shares.get(lex, 0.0) for lex in lexemes[word]), default=0.0)

    def common(word: str) -> bool:
        return share(word) > common_share and share(word) * rows > common_rows

    words = [w for w in lexemes if lexemes[w]]
    chosen = [w for w in words if not common(w)]
    if chosen or not words:
        return chosen
    return [min(words, key=share)]


# A word in more than this share of the memories (and more than COMMON_TERM_ROWS)
# chooses only when the rarer words chose fewer memories than the search wants:
# ranking the few thousand rows such a word matches was the keyword search's tail
# (Postgres, 100,000 memories: p99 from 20-30 ms to 6-8 ms).
NARROW_TERM_SHARE: Final = 0.01


def choosing_rounds(
    lexemes: Mapping[str, Sequence[str]], shares: Mapping[str, float], rows: float
) -> list[list[str]]:
    """The words that choose memories, in the order to try them: the rarer ones
    (:func:`selective_terms` at :data:`NARROW_TERM_SHARE`), then, only when those
    chose fewer memories than wanted, every word below :data:`COMMON_TERM_SHARE`.
    One round when the two are the same; none when no word has a lexeme."""
    wide = selective_terms(lexemes, shares, rows)
    if not wide:
        return []
    narrow = selective_terms(lexemes, shares, rows, NARROW_TERM_SHARE)
    return [wide] if narrow == wide else [narrow, wide]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is zero or the lengths differ."""
    if len(a) != len(b) or not a:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def normalize_vector(vector: Sequence[float]) -> list[float]:
    """The vector scaled to length 1 (a zero vector stays zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [float(x) for x in vector]


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """How retrieval ranks; built from the ``EXAI_MEMORY_*`` settings."""

    type_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TYPE_WEIGHTS))
    min_similarity: float = 0.7
    recency_half_life_days: float = 90.0
    recency_floor: float = 0.5  # the weight of a very old memory, relative to a new one
    rrf_k: float = 60.0


@dataclass(frozen=True, slots=True)
class Ranked:
    """A memory with its final score and what produced it."""

    memory: Memory
    score: float
    keyword_rank: int | None  # 1-based, None when keyword search did not find it
    similarity: float | None  # None when vector search did not find it


def recency_factor(updated_at: float, now: float, half_life_days: float, floor: float) -> float:
    """From 1.0 (just updated) down towards ``floor``, halving the gap every half-life."""
    if half_life_days <= 0:
        return 1.0
    age_days = max(0.0, now - updated_at) / _DAY_S
    return floor + (1.0 - floor) * 0.5 ** (age_days / half_life_days)


def fuse(
    keyword: Sequence[ScoredId],
    vector: Sequence[ScoredId],
    memories: Mapping[str, Memory],
    weights: RankingWeights,
    now: float,
    limit: int,
) -> list[Ranked]:
    """Reciprocal rank fusion of the two lists, weighted by type and recency.

    ``keyword`` and ``vector`` are best first. A memory missing from
    ``memories`` (deleted between the searches and the fetch) is dropped. Ties
    are broken by id so the order is deterministic.
    """
    k = weights.rrf_k
    scores: dict[str, float] = {}
    keyword_rank: dict[str, int] = {}
    similarity: dict[str, float] = {}
    for rank, hit in enumerate(keyword, start=1):
        if hit.id not in keyword_rank:
            keyword_rank[hit.id] = rank
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (k + rank)
    rank = 0
    for hit in vector:
        if hit.score < weights.min_similarity or hit.id in similarity:
            continue
        rank += 1
        similarity[hit.id] = hit.score
        scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (k + rank)
    ranked: list[Ranked] = []
    for memory_id, base in scores.items():
        memory = memories.get(memory_id)
        if memory is None:
            continue
        score = (
            base
            * weights.type_weights.get(memory.type, 1.0)
            * recency_factor(
                memory.updated_at, now, weights.recency_half_life_days, weights.recency_floor
            )
        )
        ranked.append(Ranked(memory, score, keyword_rank.get(memory_id), similarity.get(memory_id)))
    ranked.sort(key=lambda r: (-r.score, r.memory.id))
    return ranked[:limit]


DedupAction = Literal["duplicate", "update", "insert"]


def dedup_action(
    same_hash: bool, nearest: ScoredId | None, threshold: float
) -> tuple[DedupAction, str | None]:
    """What storing a new memory should do, and to which existing memory.

    ``duplicate``: the same content is stored already (nothing to write);
    ``update``: ``nearest`` is similar enough to be the same memory restated, so
    its content is replaced; ``insert``: a new memory. A threshold above 1
    turns the similarity rule off.
    """
    if same_hash:
        return "duplicate", None
    if nearest is not None and nearest.score >= threshold:
        return "update", nearest.id
    return "insert", None
