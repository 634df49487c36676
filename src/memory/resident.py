"""Resident vectors: a principal's vectors held in memory as bytes, for the SQLite store.

sqlite-vec 0.1 has no approximate index and no SIMD: its exact scan costs about
0.33 ms per 1,000 vectors of 256 dimensions, 33 ms for a principal holding
100,000. A principal with many vectors has them kept in memory instead, one
:class:`Partition` per owner, model and dimension: each vector normalised to
length 1 and stored as signed bytes (a quarter of float32's memory), compared
with the query by numkong's SIMD dot product (about 1.2 ms for 100,000 of 256
dimensions, on one core, without the GIL). The bytes only choose candidates,
four per result wanted; their float32 vectors, read from the table, rank them
exactly, so the results are sqlite-vec's. An approximate index (HNSW, usearch)
was measured and not taken: on the emulator's hashed word vectors it found 68%
to 95% of the neighbours that fusion keeps (similarity 0.7 and up) at 100,000.

The ``memories`` table stays the truth. Triggers (migration 2) write the rowid
of every memory whose vector changes (insert, update, delete) into
``memory_vector_changes``, whoever writes: this daemon, or ``exai memory`` in
another process. A partition remembers the last change it has seen (its
watermark) and, before each search, reads the changes since then and applies
them (:meth:`ResidentVectors.catch_up`). The log keeps about the last 100,000
changes (a trigger trims it); a partition whose watermark fell out of it, or is
ahead of it (the file was replaced), is loaded again from the table.

A partition is loaded from the table when its principal holds at least
``min_vectors`` vectors of that model (below that sqlite-vec's scan costs less
than 2 ms); a large one is read on a thread of its own with its own read
connection, and until it is ready searches use the exact scan, as they do when
the partition does not fit in ``max_bytes`` with the others, or loading failed.
Every search checks the owner again on the rows it reads.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numkong
import numpy as np

from exai.logs import get_logger
from exai.memory.base import ScoredId

__all__ = ["CANDIDATES", "Partition", "ResidentVectors", "quantised", "read_partition"]

log = get_logger("exai.memory")

_RETRY_FAILED_S = 60.0
_FETCH_ROWS = 10_000
_IN_CHUNK = 500
# Candidates per result the bytes choose for the exact re-rank: on the benchmark's
# vectors four gave the exact top 30 in every one of 400 queries at 100,000.
CANDIDATES = 4

Key = tuple[str, str, int]  # owner, model, dimension


def _normalised(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # a zero vector stays zero: cosine 0 with everything
    return matrix / norms


def quantised(matrix: np.ndarray) -> np.ndarray:
    """Rows normalised to length 1, then each component as a signed byte (x 127)."""
    return np.clip(np.rint(_normalised(matrix) * 127.0), -127, 127).astype(np.int8)


def _rows(blobs: Iterable[bytes], dim: int) -> np.ndarray:
    return np.frombuffer(b"".join(blobs), "<f4").reshape(-1, dim)


class Partition:
    """One owner's vectors of one model and dimension, as rows of a byte matrix.

    ``keys[i]`` is the ``memories`` rowid of row ``i``; ``watermark`` is the last
    change of ``memory_vector_changes`` the rows include.
    """

    def __init__(self, dim: int, keys: np.ndarray, vectors: np.ndarray, watermark: int) -> None:
        self.dim = dim
        self.size = len(keys)
        self.keys = np.array(keys, dtype=np.int64)
        self.matrix = quantised(vectors.reshape(-1, dim))
        self.watermark = watermark

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.keys.nbytes)

    def _grow(self, extra: int) -> None:
        need = self.size + extra
        if need <= len(self.keys):
            return
        capacity = max(need, len(self.keys) * 3 // 2, 64)
        keys = np.zeros(capacity, np.int64)
        matrix = np.zeros((capacity, self.dim), np.int8)
        keys[: self.size] = self.keys[: self.size]
        matrix[: self.size] = self.matrix[: self.size]
        self.keys, self.matrix = keys, matrix

    def apply(self, changed: Iterable[int], current: dict[int, bytes]) -> None:
        """Bring the rows of the ``changed`` rowids to ``current`` (rowid to vector
        blob, for those that are in this partition now; the others leave it)."""
        wanted = np.fromiter(changed, np.int64)
        if not len(wanted):
            return
        positions = np.flatnonzero(np.isin(self.keys[: self.size], wanted))
        gone: list[int] = []
        present: set[int] = set()
        for pos in positions.tolist():
            rowid = int(self.keys[pos])
            present.add(rowid)
            if rowid in current:
                self.matrix[pos] = quantised(_rows([current[rowid]], self.dim))[0]
            else:
                gone.append(pos)
        for pos in sorted(gone, reverse=True):  # the last row fills each hole
            last = self.size - 1
            self.keys[pos], self.matrix[pos] = self.keys[last], self.matrix[last]
            self.size = last
        new = [r for r in current if r not in present]
        if new:
            self._grow(len(new))
            self.keys[self.size : self.size + len(new)] = new
            self.matrix[self.size : self.size + len(new)] = quantised(
                _rows((current[r] for r in new), self.dim))  # fmt: skip
            self.size += len(new)

    def candidates(self, query: np.ndarray, count: int) -> list[int]:
        """The rowids of the ``count`` rows nearest ``query`` (quantised) by their
        bytes: a superset of the exact nearest, for an exact re-rank."""
        count = min(count, self.size)
        if count <= 0:
            return []
        dots = np.asarray(numkong.cdist(self.matrix[: self.size], query[None, :], metric="dot"))
        dots = dots[:, 0]
        top = np.argpartition(-dots, count - 1)[:count] if count < self.size else range(count)
        return [int(self.keys[i]) for i in top]


def read_partition(conn: Any, key: Key, cancelled: threading.Event | None = None) -> Partition:
    """``key``'s vectors from the table, with the change they include, read in the
    transaction ``conn`` is in (one snapshot)."""
    owner, model, dim = key
    watermark = conn.execute("SELECT coalesce(max(seq), 0) FROM memory_vector_changes").fetchone()
    cur = conn.execute(
        "SELECT rowid, embedding FROM memories WHERE owner = ? AND embedding_model = ?"
        " AND dimension = ? AND embedding IS NOT NULL",
        (owner, model, dim),
    )
    keys: list[int] = []
    blobs: list[bytes] = []
    while rows := cur.fetchmany(_FETCH_ROWS):
        if cancelled is not None and cancelled.is_set():
            raise InterruptedError("the store is closing")
        keys.extend(r[0] for r in rows)
        blobs.extend(r[1] for r in rows)
    return Partition(dim, np.array(keys, np.int64), _rows(blobs, dim), int(watermark[0]))


def _log_ends(db: Any) -> tuple[int, int]:
    """The first and last change in the log (0 and 0 when empty). Two statements:
    SQLite reads min() or max() from the index only when alone in a query."""
    first = db.execute("SELECT min(seq) FROM memory_vector_changes").fetchone()[0]
    last = db.execute("SELECT max(seq) FROM memory_vector_changes").fetchone()[0]
    return int(first or 0), int(last or 0)


@dataclass
class _Slot:
    """What the store knows of one partition: loaded, loading, small, or failed."""

    partition: Partition | None = None
    loading: threading.Thread | None = None
    loaded: Partition | None = None  # handed over by the loading thread
    failed: str | None = None
    failed_at: float = 0.0
    small_count: int = -1  # vectors at the last count, when below min_vectors
    small_seq: int = 0  # the change log's end at that count
    used: float = field(default_factory=time.monotonic)


class ResidentVectors:
    """The resident partitions of one SQLite memory file. Every method but
    :meth:`close` and :meth:`status` runs on the store's thread, with its connection."""

    def __init__(
        self, path: Path, min_vectors: int, max_bytes: int, inline_max: int,
        connect: Callable[..., Any] = sqlite3.connect,
    ) -> None:  # fmt: skip
        self.path = path
        # How the store's connection was made (its SQLite library): see sqlite._resident.
        self._connect = connect
        self.min_vectors = min_vectors
        self.max_bytes = max_bytes
        self.inline_max = inline_max  # load smaller partitions at once, on the store's thread
        self._slots: dict[Key, _Slot] = {}
        self._cancel = threading.Event()

    def partition(self, db: Any, key: Key) -> Partition | None:
        """``key``'s partition, caught up with the table, or None when a search
        should use the exact scan (too few vectors, loading, too large, failed)."""
        slot = self._slots.setdefault(key, _Slot())
        slot.used = time.monotonic()
        if slot.loaded is not None:
            slot.partition, slot.loaded, slot.loading = slot.loaded, None, None
            self._make_room(key, slot.partition.nbytes)
        if slot.partition is not None:
            if self.catch_up(db, key, slot.partition):
                return slot.partition
            slot.partition = None  # the log no longer covers it: load it again
        if slot.loading is not None and slot.loading.is_alive():
            return None
        if slot.failed and time.monotonic() - slot.failed_at < _RETRY_FAILED_S:
            return None
        count = self._count(db, key, slot)
        if count < self.min_vectors:
            return None
        if count * (key[2] + 8) > self.max_bytes:
            slot.failed, slot.failed_at = "larger than the memory allowed", time.monotonic()
            return None
        if count <= self.inline_max:
            slot.partition = read_partition(db, key)
            self._make_room(key, slot.partition.nbytes)
            return slot.partition
        self._start_loading(key, slot)
        return None

    def _count(self, db: Any, key: Key, slot: _Slot) -> int:
        """The partition's vectors, counted again only when enough changes arrived
        since the last count to reach ``min_vectors``."""
        owner, model, dim = key
        first, end = _log_ends(db)
        if slot.small_count >= 0 and first <= slot.small_seq + 1 and end >= slot.small_seq:
            grown = db.execute(
                "SELECT count(*) FROM memory_vector_changes WHERE owner = ? AND seq > ?",
                (owner, slot.small_seq),
            ).fetchone()[0]
            if slot.small_count + grown < self.min_vectors:
                return slot.small_count
        count = db.execute(
            "SELECT count(*) FROM memories WHERE owner = ? AND embedding_model = ?"
            " AND dimension = ? AND embedding IS NOT NULL",
            (owner, model, dim),
        ).fetchone()[0]
        slot.small_count, slot.small_seq = (count, end) if count < self.min_vectors else (-1, 0)
        return int(count)

    def catch_up(self, db: Any, key: Key, partition: Partition) -> bool:
        """Apply the changes since the partition's watermark; False when the log
        cannot say what they were (trimmed past it, or behind it)."""
        owner, model, dim = key
        first, last = _log_ends(db)
        if last == partition.watermark:
            return True
        if last < partition.watermark or first > partition.watermark + 1:
            return False
        changed = [r[0] for r in db.execute(
            "SELECT DISTINCT memory_rowid FROM memory_vector_changes WHERE owner = ? AND seq > ?",
            (owner, partition.watermark),
        )]  # fmt: skip
        current: dict[int, bytes] = {}
        for i in range(0, len(changed), _IN_CHUNK):
            chunk = changed[i : i + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            current.update(db.execute(
                f"SELECT rowid, embedding FROM memories WHERE rowid IN ({marks}) AND +owner = ?"
                " AND +embedding_model = ? AND +dimension = ? AND embedding IS NOT NULL",
                (*chunk, owner, model, dim),
            ).fetchall())  # fmt: skip
        partition.apply(changed, current)
        partition.watermark = int(last)
        return True

    def search(
        self, db: Any, owner: str, vector: Any, model: str, limit: int,
        where: str, args: list[Any],
    ) -> list[ScoredId] | None:  # fmt: skip
        """The nearest of ``owner``'s vectors of ``model`` that pass ``where`` (on
        ``m.`` columns), or None when the exact scan must answer instead.

        The bytes choose :data:`CANDIDATES` times ``limit`` candidates (at least
        64); their vectors, read from the table with the owner and ``where``
        checked, rank them exactly.
        """
        partition = self.partition(db, (owner, model, len(vector)))
        if partition is None:
            return None
        query = _normalised(np.asarray(vector, np.float32)[None, :])
        query8 = quantised(query)[0]
        count = max(limit * CANDIDATES * (4 if where else 1), 64)
        while True:
            rowids = partition.candidates(query8, count)
            marks = ",".join("?" * len(rowids))
            rows = db.execute(
                # "+": by rowid, not through the owner's index, which reads all its rows.
                f"SELECT m.id, m.embedding FROM memories m WHERE m.rowid IN ({marks})"
                f" AND +m.owner = ? AND +m.embedding_model = ? AND +m.dimension = ?{where}",
                (*rowids, owner, model, len(vector), *args),
            ).fetchall() if rowids else []  # fmt: skip
            if len(rows) >= limit or count >= partition.size:
                break
            count *= 4  # the filters left too few: look further
        if not rows:
            return []
        sims = _normalised(_rows((r[1] for r in rows), partition.dim)) @ query[0]
        found = sorted(zip((r[0] for r in rows), sims.tolist(), strict=True),
                       key=lambda hit: (-hit[1], hit[0]))  # fmt: skip
        return [ScoredId(i, score) for i, score in found[:limit]]

    def _start_loading(self, key: Key, slot: _Slot) -> None:
        def load() -> None:
            try:
                conn = self._connect(f"file:{self.path}?mode=ro", uri=True,
                                       isolation_level=None, check_same_thread=False)  # fmt: skip
                try:
                    conn.execute("PRAGMA busy_timeout = 10000")
                    conn.execute("BEGIN")
                    slot.loaded = read_partition(conn, key, self._cancel)
                    conn.execute("COMMIT")
                    slot.failed = None
                finally:
                    conn.close()
            except Exception as exc:
                slot.failed, slot.failed_at = f"{type(exc).__name__}: {exc}", time.monotonic()
                if not self._cancel.is_set():
                    log.warning("memory_resident_load_failed", error=slot.failed)

        slot.loading = threading.Thread(target=load, name="exai-memory-resident", daemon=True)
        slot.loading.start()

    def _make_room(self, keep: Key, need: int) -> None:
        """Let go of the least recently used partitions until ``need`` more bytes fit."""
        held = sorted((s.used, k, s.partition.nbytes) for k, s in self._slots.items()
                      if s.partition is not None and k != keep)  # fmt: skip
        total = sum(size for _, _, size in held)
        for _, k, size in held:
            if total + need <= self.max_bytes:
                break
            total -= size
            self._slots[k].partition = None

    def status(self) -> dict[str, Any]:
        slots = list(self._slots.values())
        held = [s.partition for s in slots if s.partition is not None]
        out: dict[str, Any] = {
            "partitions": len(held),
            "vectors": sum(p.size for p in held),
            "bytes": sum(p.nbytes for p in held),
            "loading": sum(1 for s in slots if s.loading is not None and s.loading.is_alive()),
            "min_vectors": self.min_vectors,
            "max_bytes": self.max_bytes,
        }
        failed = sorted({s.failed for s in slots if s.failed and s.partition is None})
        if failed:
            out["not_loaded"] = failed
        return out

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the loading threads (they check between batches of rows)."""
        self._cancel.set()
        for slot in self._slots.values():
            if slot.loading is not None:
                slot.loading.join(timeout_s)
