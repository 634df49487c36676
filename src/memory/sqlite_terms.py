"""Which query words choose memories in the SQLite store's keyword search.

A word in most memories costs the keyword search its time and adds nothing to
its ranking: FTS5 computes BM25 for every row a query matches before it can
order them (62 ms for a word in 96,000 of 100,000 memories, against under 1 ms
for the query's other words), and BM25 gives a word in more than half of the
rows no weight at all (FTS5 floors its IDF near zero), one in a few percent
little. So, as on Postgres, the words that choose are the selective ones, the
rarer first (:func:`~exai.memory.ranking.choosing_rounds`); on SQLite the others
are left out of the query, since a word FTS5 ranks must also be one it matches.

The counts come from FTS5 itself: the query's words go through the index's own
tokenizer (a ``temp`` FTS5 table, so that "targets" is counted as the stem
"target"), and ``fts5vocab`` gives the rows holding each stem. Reading a stem's
count walks its list of rows (about 2 ms for the commonest at 100,000), so
counts are kept for :data:`COUNTS_TTL_S`, as Postgres keeps its planner's, or
until the table grew or shrank by a tenth.

The owner is found two ways (:func:`owner_in_match`). Its token in the MATCH has
FTS5 find and rank the owner's matches only, but BM25 then reads that token's
positions in every row it ranks, a token in each of the owner's rows: at
1,000,000 memories of one owner, 32 ms for a query whose words match 7,700 rows,
against 7.5 ms for the words alone. So a principal holding more than
:data:`OWNER_PHRASE_MAX_SHARE` of the memories has the words ranked among
everyone's and its own kept through the narrow index on (owner, rowid) (13 ms
for that query, the same rows and scores); a smaller one keeps its token in the
MATCH, so that other principals' matches are never ranked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from exai.memory.ranking import choosing_rounds

__all__ = ["COUNTS_TTL_S", "OWNER_PHRASE_MAX_SHARE", "ChoosingTerms", "owner_in_match"]

COUNTS_TTL_S: Final = 300.0
# Ranking a row costs about 4.2 us with the owner's token in the MATCH and 1.7 us
# without it (BM25 on the words, then the owner's index): the token pays for itself
# while the owner's rows are under about 40% of the memories.
OWNER_PHRASE_MAX_SHARE: Final = 1 / 3
_STEMS_KEPT = 10_000

_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_query_words"
    " USING fts5(word, tokenize='porter unicode61')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_query_stems"
    " USING fts5vocab(temp, memory_query_words, 'instance')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_fts_rows"
    " USING fts5vocab(main, memories_fts, 'row')",
)


def owner_in_match(owner_rows: int, rows: int) -> bool:
    """Whether the owner's token goes into the MATCH (FTS5 ranks the owner's matches
    only), or the words are ranked among every principal's and the owner's rows kept
    by index: the latter when the owner holds more than :data:`OWNER_PHRASE_MAX_SHARE`
    of the ``rows`` memories."""
    return owner_rows <= rows * OWNER_PHRASE_MAX_SHARE


class ChoosingTerms:
    """Caches of stems and counts for one connection; used on the store's thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ready = False
        self._stems: dict[str, list[str]] = {}
        self._counts: dict[str, tuple[float, int]] = {}
        self._rows: tuple[float, int] | None = None
        self._top = 0  # the highest rowid when the rows were counted
        self._owners: dict[str, tuple[float, int]] = {}

    def rounds(self, db: Any, terms: Sequence[str]) -> list[list[str]]:
        """The words of ``terms`` (plain words, from :func:`ranking.query_terms`) that
        choose memories, round by round (:func:`ranking.choosing_rounds`)."""
        if not terms:
            return []
        rows = self._row_count(db)
        stems = self._stems_of(db, terms)
        counts = self._counts_of(db, {s for word in terms for s in stems[word]})
        shares = {stem: count / rows for stem, count in counts.items()} if rows else {}
        return choosing_rounds({w: stems[w] for w in terms}, shares, rows)

    def owner_in_match(self, db: Any, owner: str) -> bool:
        """:func:`owner_in_match` for ``owner``, by counts kept as the stems' are."""
        rows = self._row_count(db)
        now = self._clock()
        kept = self._owners.get(owner)
        if kept is None or now - kept[0] >= COUNTS_TTL_S:
            if len(self._owners) >= _STEMS_KEPT:
                self._owners.clear()
            count = db.execute("SELECT count(*) FROM memories WHERE owner = ?", (owner,))
            kept = self._owners[owner] = (now, int(count.fetchone()[0]))
        return owner_in_match(kept[1], rows)

    def _stems_of(self, db: Any, terms: Sequence[str]) -> dict[str, list[str]]:
        missing = [w for w in dict.fromkeys(terms) if w not in self._stems]
        if missing:
            if not self._ready:
                for sql in _TABLES:
                    db.execute(sql)
                self._ready = True
            db.execute("DELETE FROM temp.memory_query_words")
            db.executemany("INSERT INTO temp.memory_query_words(rowid, word) VALUES (?, ?)",
                           list(enumerate(missing)))  # fmt: skip
            found: dict[int, list[str]] = {}
            for doc, stem in db.execute("SELECT doc, term FROM temp.memory_query_stems"):
                found.setdefault(int(doc), []).append(str(stem))
            if len(self._stems) + len(missing) > _STEMS_KEPT:
                self._stems.clear()
            for i, word in enumerate(missing):
                self._stems[word] = found.get(i, [])
        return {w: self._stems[w] for w in terms}

    def _counts_of(self, db: Any, stems: set[str]) -> dict[str, int]:
        now = self._clock()
        stale = sorted(s for s in stems if now - self._counts.get(s, (-COUNTS_TTL_S, 0))[0]
                       >= COUNTS_TTL_S)  # fmt: skip
        if stale:
            if len(self._counts) + len(stale) > _STEMS_KEPT:
                self._counts.clear()
            marks = ",".join("?" * len(stale))
            got = dict(db.execute(
                f"SELECT term, doc FROM temp.memory_fts_rows WHERE term IN ({marks})", stale
            ).fetchall())  # fmt: skip
            for stem in stale:
                self._counts[stem] = (now, int(got.get(stem, 0)))
        return {s: self._counts[s][1] if s in self._counts else 0 for s in stems}

    def _row_count(self, db: Any) -> int:
        """The memories counted, again after :data:`COUNTS_TTL_S` or as soon as the
        highest rowid moved by a tenth (a bulk load, a purge), when the stems' counts
        are dropped too: shares are only right against the count they were taken with."""
        now = self._clock()
        top = int(db.execute("SELECT max(rowid) FROM memories").fetchone()[0] or 0)
        if (self._rows is None or now - self._rows[0] >= COUNTS_TTL_S
                or abs(top - self._top) > self._top // 10):  # fmt: skip
            self._rows = (now, int(db.execute("SELECT count(*) FROM memories").fetchone()[0]))
            self._counts.clear()
            self._owners.clear()
            self._top = top
        return self._rows[1]
