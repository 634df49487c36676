"""The embedded memory store: SQLite with FTS5 for keywords and sqlite-vec for vectors.

Memories live in their own file (``memory.sqlite3`` beside the conversation
store), on one connection with a thread of its own
(:class:`~exai.sqldb.thread.SqliteThread`): sqlite-vec is a loadable
extension, which must be loaded into the connection that queries it, and the
conversation store's connections have no reason to carry it. Loading it, and the
``vec0`` tables vectors go into, are :mod:`exai.memory.sqlite_vec`'s. When it
cannot be loaded, vectors are still stored (as float32 blobs in ``memories``) and
searched by a scan in Python: correct, slower, and said so in
:meth:`SqliteMemoryStore.status`. A principal with many vectors has them held in
memory and searched as one matrix (:mod:`exai.memory.resident`), exactly and
about fourteen times faster than sqlite-vec's scan; the table stays the truth.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from exai.logs import get_logger
from exai.memory.base import (
    ANY_OWNER,
    Memory,
    MemoryNotFoundError,
    MemoryStore,
    NewMemory,
    Owner,
    ScoredId,
)
from exai.memory.queue import SqliteExtractionQueue
from exai.memory.schema import MEMORY_COLUMNS, SQLITE_MIGRATIONS, decode_memory
from exai.memory.sqlite_terms import ChoosingTerms
from exai.memory.sqlite_vec import VecTables, connect_sqlite, pack, scan
from exai.sqldb.executor import ThreadConnection, drive
from exai.sqldb.migrations import apply_sqlite_migrations
from exai.sqldb.thread import SqliteThread, prepare_file

__all__ = ["SqliteMemoryStore"]

T = TypeVar("T")
log = get_logger("exai.memory")

# Below this many vectors sqlite-vec's exact scan takes under 2 ms; at and above it
# a principal's vectors of one model are held in memory (exai.memory.resident).
RESIDENT_MIN_VECTORS = 5_000
RESIDENT_MAX_BYTES = 1 << 30


def _connect(path: Path, load_vec: bool) -> tuple[Any, str | None]:
    reasons: list[str | None] = []

    def connect(where: str) -> Any:
        conn, no_vec = connect_sqlite(where, load_vec)
        reasons.append(no_vec)
        return conn

    conn = prepare_file(path, connect)
    return conn, reasons[0]


def _owner_key(owner: str) -> str:
    """The token that stands for an owner in the full-text index."""
    return "o" + hashlib.sha256(owner.encode()).hexdigest()[:24]


def _filters(
    types: Sequence[str] | None, projects: Sequence[str] | None, prefix: str = ""
) -> tuple[str, list[Any]]:
    sql, args = "", []
    if types:
        sql += f" AND {prefix}type IN ({','.join('?' * len(types))})"
        args += list(types)
    if projects is not None:
        marks = ",".join("?" * len(projects)) or "NULL"
        sql += f" AND ({prefix}project IS NULL OR {prefix}project IN ({marks}))"
        args += list(projects)
    return sql, args


def _resident(
    path: Path, min_vectors: int | None, max_bytes: int, inline_max: int, conn: Any
) -> tuple[Any, str | None]:
    if min_vectors is None:
        return None, "turned off"
    if min_vectors < 1 or max_bytes < 0 or inline_max < 0:
        raise ValueError("resident vectors: min_vectors >= 1, max_bytes and inline_max >= 0")
    try:
        from exai.memory.resident import ResidentVectors
    except ImportError as exc:  # numpy missing
        return None, f"numpy could not be imported ({exc})"
    # The loader's own connection is made by the library the store's was (the bundled
    # pysqlite3 or the standard sqlite3): two copies of SQLite in one process on one
    # file break each other's locks, and a WAL file one of them removes under the
    # other's map of it stops the process with a bus error.
    connect = importlib.import_module(type(conn).__module__).connect
    return ResidentVectors(path, min_vectors, max_bytes, inline_max, connect), None


class SqliteMemoryStore(MemoryStore):
    """Memories in one SQLite file. Create with :meth:`open`."""

    def __init__(
        self, path: Path, conn: Any, no_vec: str | None, clock: Callable[[], float],
        resident: Any = None, no_resident: str | None = None,
    ) -> None:  # fmt: skip
        self.path = path
        self._thread = SqliteThread(conn, "exai-memory")
        self._no_vec = no_vec
        self._clock = clock
        self._vec = VecTables()
        self._resident = resident  # a ResidentVectors, or None with the reason in no_resident
        self._no_resident = no_resident
        self._terms = ChoosingTerms()
        self.extraction = SqliteExtractionQueue(self._run, clock)

    @classmethod
    async def open(
        cls, path: str | Path, clock: Callable[[], float] = time.time, *, sqlite_vec: bool = True,
        resident_min_vectors: int | None = RESIDENT_MIN_VECTORS,
        resident_max_bytes: int = RESIDENT_MAX_BYTES, resident_inline_max: int = 20_000,
    ) -> SqliteMemoryStore:  # fmt: skip
        """``resident_min_vectors``: the vectors a principal holds (of one model) from
        which they are searched in memory (None: never); ``resident_max_bytes``: the
        memory all resident vectors may take; ``resident_inline_max``: partitions up to
        this size load at once on the store's thread, larger ones on a thread of
        their own while searches use the scan."""
        path = Path(path)
        conn, no_vec = await asyncio.to_thread(_connect, path, sqlite_vec)
        if no_vec:
            log.warning("sqlite-vec unavailable: vectors are searched by a scan", reason=no_vec)
        resident, no_resident = _resident(path, resident_min_vectors, resident_max_bytes,
                                          resident_inline_max, conn)  # fmt: skip
        store = cls(path, conn, no_vec, clock, resident, no_resident)
        try:
            await store._run(store._migrate)
        except BaseException:
            await store.aclose()
            raise
        return store

    # --- plumbing ---------------------------------------------------------------

    async def _run(self, fn: Callable[[Any], T], begin: str = "BEGIN IMMEDIATE") -> T:
        """``fn(conn)`` in one transaction, on the store's thread (``begin``: ``BEGIN``
        for one that only reads)."""
        return await self._thread.transaction(fn, begin)

    def _migrate(self, db: Any) -> None:
        table = "memory_schema_version"
        drive(apply_sqlite_migrations(ThreadConnection(db), table, SQLITE_MIGRATIONS))
        if self._no_vec is None:
            self._vec.load(db)

    def _put_vector(
        self, db: Any, rowid: int, owner: str, vector: Sequence[float] | None,
        model: str | None, *, fresh: bool = False,
    ) -> None:  # fmt: skip
        if self._no_vec is None:
            self._vec.put(db, rowid, owner, vector, model, fresh=fresh)

    # --- writes -------------------------------------------------------------------

    def _insert_one(
        self, db: Any, memory: NewMemory, vector: Sequence[float] | None, model: str | None
    ) -> bool:
        now = self._clock()
        blob = pack(vector) if vector is not None else None
        cur = db.execute(
            "INSERT INTO memories (id, owner, project, type, content, tags, content_hash, source,"
            " created_at, updated_at, embedding_model, dimension, embedding, owner_key)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (owner, content_hash) DO NOTHING",
            (str(uuid.uuid4()), memory.owner, memory.project, memory.type, memory.content,
             json.dumps(memory.tags), memory.content_hash, memory.source, now, now,
             model if vector is not None else None,
             len(vector) if vector is not None else None, blob, _owner_key(memory.owner)),
        )  # fmt: skip
        if cur.rowcount <= 0:
            return False
        self._put_vector(db, cur.lastrowid, memory.owner, vector, model, fresh=True)
        return True

    async def insert(
        self, memory: NewMemory, vector: Sequence[float] | None, model: str | None
    ) -> Memory:
        def body(db: Any) -> Memory:
            self._insert_one(db, memory, vector, model)
            row = db.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = ? AND content_hash = ?",
                (memory.owner, memory.content_hash),
            ).fetchone()
            return decode_memory(row)

        return await self._run(body)

    async def insert_many(
        self, memories: Sequence[tuple[NewMemory, Sequence[float] | None]], model: str | None
    ) -> int:
        return await self._run(
            lambda db: sum(self._insert_one(db, m, v, model) for m, v in memories)
        )

    async def update(
        self, memory_id: str, owner: Owner, *, content: str, type: str, tags: Sequence[str],
        content_hash: str, vector: Sequence[float] | None, model: str | None,
    ) -> Memory:  # fmt: skip
        def body(db: Any) -> Memory:
            row = self._get(db, memory_id, owner)
            rowid = db.execute("SELECT rowid FROM memories WHERE id = ?", (memory_id,)).fetchone()
            db.execute(
                "UPDATE memories SET content = ?, type = ?, tags = ?, content_hash = ?,"
                " updated_at = ?, embedding_model = ?, dimension = ?, embedding = ? WHERE id = ?",
                (content, type, json.dumps(list(tags)), content_hash, self._clock(),
                 model if vector is not None else None,
                 len(vector) if vector is not None else None,
                 pack(vector) if vector is not None else None, memory_id),
            )  # fmt: skip
            self._put_vector(db, rowid[0], row.owner, vector, model)
            return self._get(db, memory_id, owner)

        return await self._run(body)

    async def set_vector(
        self, memory_id: str, vector: Sequence[float] | None, model: str | None
    ) -> None:
        def body(db: Any) -> None:
            row = db.execute(
                "SELECT rowid, owner FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                raise MemoryNotFoundError(memory_id)
            db.execute(
                "UPDATE memories SET embedding_model = ?, dimension = ?, embedding = ?"
                " WHERE id = ?",
                (model if vector is not None else None,
                 len(vector) if vector is not None else None,
                 pack(vector) if vector is not None else None, memory_id),
            )  # fmt: skip
            self._put_vector(db, row[0], row[1], vector, model)

        await self._run(body)

    async def delete(self, memory_id: str, owner: Owner) -> Memory:
        def body(db: Any) -> Memory:
            memory = self._get(db, memory_id, owner)
            rowid = db.execute("SELECT rowid FROM memories WHERE id = ?", (memory_id,)).fetchone()
            self._put_vector(db, rowid[0], memory.owner, None, None)
            db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            return memory

        return await self._run(body)

    # --- reads --------------------------------------------------------------------

    def _get(self, db: Any, memory_id: str, owner: Owner) -> Memory:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?"
        row = db.execute(sql, (memory_id,)).fetchone()
        if row is None or (owner is not ANY_OWNER and row[1] != owner):
            raise MemoryNotFoundError(memory_id)
        return decode_memory(row)

    async def get(self, memory_id: str, owner: Owner) -> Memory:
        return await self._run(lambda db: self._get(db, memory_id, owner))

    async def find_hash(self, owner: str, content_hash: str) -> Memory | None:
        def body(db: Any) -> Memory | None:
            row = db.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE owner = ? AND content_hash = ?",
                (owner, content_hash),
            ).fetchone()
            return decode_memory(row) if row else None

        return await self._run(body)

    async def fetch(self, owner: str, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        # By id first: "+owner" keeps the planner off the owner index, which would
        # read every one of the owner's rows to find a few.
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({','.join('?' * len(ids))})"
            " AND +owner = ?"
        )
        return await self._run(
            lambda db: [decode_memory(r) for r in db.execute(sql, (*ids, owner))]
        )

    async def list_memories(
        self, owner: Owner, *, types: Sequence[str] | None = None,
        projects: Sequence[str] | None = None, limit: int = 100, offset: int = 0,
    ) -> list[Memory]:  # fmt: skip
        where, args = _filters(types, projects)
        if owner is not ANY_OWNER:
            where += " AND owner = ?"
            args.append(owner)
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE 1 = 1{where}"
            " ORDER BY updated_at DESC, id LIMIT ? OFFSET ?"
        )
        return await self._run(
            lambda db: [decode_memory(r) for r in db.execute(sql, (*args, limit, offset))]
        )

    async def count(self, owner: Owner) -> int:
        if owner is ANY_OWNER:
            return await self._run(
                lambda db: int(db.execute("SELECT count(*) FROM memories").fetchone()[0])
            )
        sql = "SELECT count(*) FROM memories WHERE owner = ?"
        return await self._run(lambda db: int(db.execute(sql, (owner,)).fetchone()[0]))

    async def keyword_search(
        self, owner: str, terms: Sequence[str], limit: int, *,
        types: Sequence[str] | None = None, projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:  # fmt: skip
        if not terms:
            return []
        where, args = _filters(types, projects, "m.")
        # The full-text index finds the owner's matches first (the owner's token is
        # in the MATCH); left to itself the planner walks the owner's rows and
        # queries the index once per row. The owner column weighs nothing in BM25.
        inner_limit = "" if where else f" LIMIT {int(limit)}"
        rank = "bm25(memories_fts, 1.0, 0.5, 0.0)"
        sql = (
            f"WITH hits AS MATERIALIZED (SELECT rowid, {rank} AS rank"
            f" FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank{inner_limit})"
            " SELECT m.id, hits.rank FROM hits JOIN memories m ON m.rowid = hits.rowid"
            f" WHERE m.owner = ?{where} ORDER BY hits.rank LIMIT ?"
        )
        # A principal holding most of the memories: the words ranked among everyone's,
        # the owner's kept by its narrow index (exai.memory.sqlite_terms: why).
        everyone = (
            f"WITH hits AS MATERIALIZED (SELECT rowid, {rank} AS rank"
            " FROM memories_fts WHERE memories_fts MATCH ?), mine AS MATERIALIZED"
            " (SELECT rowid, rank FROM hits WHERE EXISTS (SELECT 1 FROM memories o"
            " INDEXED BY memories_owner_rowid WHERE o.owner = ? AND o.rowid = hits.rowid)"
            " ORDER BY rank LIMIT ?)"
            " SELECT m.id, mine.rank FROM mine JOIN memories m ON m.rowid = mine.rowid"
            " ORDER BY mine.rank"
        )

        def search(db: Any) -> list[Any]:
            rows: list[Any] = []
            by_owner = bool(where) or self._terms.owner_in_match(db, owner)
            for chosen in self._terms.rounds(db, terms):  # exai.memory.sqlite_terms: why
                words = " OR ".join('"' + t.replace('"', "") + '"' for t in chosen)
                if by_owner:
                    match = f'owner_key : "{_owner_key(owner)}" AND ({words})'
                    rows = db.execute(sql, (match, owner, *args, limit)).fetchall()
                else:
                    rows = db.execute(everyone, (f"({words})", owner, limit)).fetchall()
                if len(rows) >= limit:
                    break
            return rows

        rows = await self._run(search, "BEGIN")
        return [ScoredId(r[0], -float(r[1])) for r in rows]

    async def vector_search(
        self, owner: str, vector: Sequence[float], model: str, limit: int, *,
        types: Sequence[str] | None = None, projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:  # fmt: skip
        where, args = _filters(types, projects, "m.")
        exact = scan if self._no_vec is not None else self._vec.search

        def search(db: Any) -> list[ScoredId]:
            if self._resident is not None:
                found = self._resident.search(db, owner, vector, model, limit, where, args)
                if found is not None:
                    return found
            return exact(db, owner, vector, model, limit, where, args)

        return await self._run(search, "BEGIN")

    async def stale_vectors(
        self, model: str | None, dimension: int | None, limit: int
    ) -> list[Memory]:
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE embedding_model IS NULL"
            " OR embedding_model IS NOT ? OR dimension IS NOT ? ORDER BY rowid LIMIT ?"
        )
        return await self._run(
            lambda db: [decode_memory(r) for r in db.execute(sql, (model, dimension, limit))]
        )

    def status(self) -> dict[str, Any]:
        """``vector_search``: how a principal's vectors are searched below the resident
        threshold and when resident vectors cannot be used; ``vector_resident``:
        the partitions held in memory, or ``off`` and why."""
        out: dict[str, Any] = {"backend": "sqlite", "keyword": "fts5-bm25"}
        if self._no_vec is None:
            out["vector_search"] = "sqlite-vec"
        else:
            out["vector_search"] = "scan"
            out["vector_search_reason"] = f"sqlite-vec could not be loaded ({self._no_vec})"
        if self._resident is None:
            out["vector_resident"] = "off"
            out["vector_resident_reason"] = self._no_resident
        else:
            out["vector_resident"] = self._resident.status()
        return out

    async def aclose(self) -> None:
        if self._resident is not None:
            await asyncio.to_thread(self._resident.close)
        await self._thread.close()
