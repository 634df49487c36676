"""The embedded memory store: SQLite with FTS5 for keywords and sqlite-vec for vectors.

Memories live in their own file (``memory.sqlite3`` beside the conversation
store), on one connection with a thread of its own
(:class:`~exai.sqldb.thread.SqliteThread`): sqlite-vec is a loadable
extension, which must be loaded into the connection that queries it, and the
conversation store's connections have no reason to carry it. Loading it, and the
``vec0`` tables vectors go into, are :mod:`exai.memory.sqlite_vec`'s. When it
cannot be loaded, vectors are still stored (as float32 blobs in ``memories``) and
searched by a scan in Python: correct, slower, and said so in
:meth:`SqliteMemoryStore.status`.
"""

from __future__ import annotations

import asyncio
import hashlib
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
from exai.memory.sqlite_vec import VecTables, connect_sqlite, pack, scan
from exai.sqldb.executor import ThreadConnection, drive
from exai.sqldb.migrations import apply_sqlite_migrations
from exai.sqldb.thread import SqliteThread, prepare_file

__all__ = ["SqliteMemoryStore"]

T = TypeVar("T")
log = get_logger("exai.memory")


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


class SqliteMemoryStore(MemoryStore):
    """Memories in one SQLite file. Create with :meth:`open`."""

    def __init__(
        self, path: Path, conn: Any, no_vec: str | None, clock: Callable[[], float]
    ) -> None:
        self.path = path
        self._thread = SqliteThread(conn, "exai-memory")
        self._no_vec = no_vec
        self._clock = clock
        self._vec = VecTables()
        self.extraction = SqliteExtractionQueue(self._run, clock)

    @classmethod
    async def open(
        cls, path: str | Path, clock: Callable[[], float] = time.time, *, sqlite_vec: bool = True
    ) -> SqliteMemoryStore:
        path = Path(path)
        conn, no_vec = await asyncio.to_thread(_connect, path, sqlite_vec)
        if no_vec:
            log.warning("sqlite-vec unavailable: vectors are searched by a scan", reason=no_vec)
        store = cls(path, conn, no_vec, clock)
        try:
            await store._run(store._migrate)
        except BaseException:
            await store.aclose()
            raise
        return store

    # --- plumbing ---------------------------------------------------------------

    async def _run(self, fn: Callable[[Any], T]) -> T:
        """``fn(conn)`` in one transaction, on the store's thread."""
        return await self._thread.transaction(fn)

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
        words = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
        match = f'owner_key : "{_owner_key(owner)}" AND ({words})'
        where, args = _filters(types, projects, "m.")
        # The full-text index finds the owner's matches first (the owner's token is
        # in the MATCH); left to itself the planner walks the owner's rows and
        # queries the index once per row. The owner column weighs nothing in BM25.
        inner_limit = "" if where else f" LIMIT {int(limit)}"
        sql = (
            "WITH hits AS MATERIALIZED (SELECT rowid, bm25(memories_fts, 1.0, 0.5, 0.0) AS rank"
            f" FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank{inner_limit})"
            " SELECT m.id, hits.rank FROM hits JOIN memories m ON m.rowid = hits.rowid"
            f" WHERE m.owner = ?{where} ORDER BY hits.rank LIMIT ?"
        )
        rows = await self._run(lambda db: db.execute(sql, (match, owner, *args, limit)).fetchall())
        return [ScoredId(r[0], -float(r[1])) for r in rows]

    async def vector_search(
        self, owner: str, vector: Sequence[float], model: str, limit: int, *,
        types: Sequence[str] | None = None, projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:  # fmt: skip
        where, args = _filters(types, projects, "m.")
        search = scan if self._no_vec is not None else self._vec.search
        return await self._run(lambda db: search(db, owner, vector, model, limit, where, args))

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
        if self._no_vec is None:
            return {"backend": "sqlite", "keyword": "fts5-bm25", "vector_search": "sqlite-vec"}
        return {
            "backend": "sqlite",
            "keyword": "fts5-bm25",
            "vector_search": "scan",
            "vector_search_reason": f"sqlite-vec could not be loaded ({self._no_vec})",
        }

    async def aclose(self) -> None:
        await self._thread.close()
