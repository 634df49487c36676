"""The embedded memory store: SQLite with FTS5 for keywords and sqlite-vec for vectors.

Memories live in their own file (``memory.sqlite3`` beside the conversation
store), on one connection with a thread of its own: sqlite-vec is a loadable
extension, which must be loaded into the connection that queries it, and the
conversation store's connections have no reason to carry it.

Loading an extension needs a ``sqlite3`` module built with
``enable_load_extension``. Some Python builds (pyenv's default among them)
leave it out, so the bundled ``pysqlite3`` is preferred when installed, then the
standard library's. When neither can load sqlite-vec, vectors are still stored
(as float32 blobs in ``memories``) and searched by a scan in Python: correct,
slower, and said so in :meth:`SqliteMemoryStore.status`.

Vectors go into one ``vec0`` table per dimension, partitioned by owner (a
search reads only that principal's vectors) with the model as a metadata
column (a search compares vectors of one model only).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from exai.memory.ranking import cosine
from exai.memory.schema import MEMORY_COLUMNS, SQLITE_MIGRATIONS, decode_memory
from exai.store.executor import ThreadConnection, drive
from exai.store.migrations import apply_sqlite_migrations

__all__ = ["SqliteMemoryStore", "connect_sqlite"]

T = TypeVar("T")
log = get_logger("exai.memory")


def connect_sqlite(path: str, load_vec: bool = True) -> tuple[Any, str | None]:
    """A connection with sqlite-vec loaded if possible, and why not otherwise."""
    if not load_vec:
        import sqlite3

        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        return conn, "turned off (EXAI_MEMORY_SQLITE_VEC=false)"
    errors: list[str] = []
    modules: list[Any] = []
    try:
        from pysqlite3 import dbapi2 as bundled

        modules.append(bundled)
    except ImportError:
        errors.append("pysqlite3 is not installed")
    import sqlite3

    modules.append(sqlite3)
    for module in modules:
        conn = module.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        try:
            import sqlite_vec

            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            return conn, None
        except (AttributeError, ImportError, module.OperationalError) as exc:
            errors.append(f"{module.__name__}: {type(exc).__name__}: {exc}")
            if module is not modules[-1]:
                conn.close()
                continue
            return conn, "; ".join(errors)
    raise AssertionError("unreachable")


def _connect(path: Path, load_vec: bool) -> tuple[Any, str | None]:
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn, no_vec = connect_sqlite(str(path), load_vec)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
        conn.execute(f"PRAGMA {pragma}")
    return conn, no_vec


def _owner_key(owner: str) -> str:
    """The token that stands for an owner in the full-text index."""
    return "o" + hashlib.sha256(owner.encode()).hexdigest()[:24]


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


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
        self._conn = conn
        self._no_vec = no_vec
        self._clock = clock
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="exai-memory")
        self._vec_dims: set[int] = set()
        self._closed = False
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

        def transaction() -> T:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return result

        return await asyncio.get_running_loop().run_in_executor(self._pool, transaction)

    def _migrate(self, db: Any) -> None:
        migrations = SQLITE_MIGRATIONS
        drive(apply_sqlite_migrations(ThreadConnection(db), "memory_schema_version", migrations))
        if self._no_vec is None:
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE name LIKE 'memory_vec_%' AND type = 'table'"
            ).fetchall():
                suffix = name.removeprefix("memory_vec_")
                if suffix.isdigit():
                    self._vec_dims.add(int(suffix))

    def _vec_table(self, db: Any, dimension: int) -> str:
        name = f"memory_vec_{int(dimension)}"
        if dimension not in self._vec_dims:
            db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
                f"owner text partition key, model text, embedding float[{int(dimension)}]"
                " distance_metric=cosine)"
            )
            self._vec_dims.add(dimension)
        return name

    def _put_vector(
        self, db: Any, rowid: int, owner: str, vector: Sequence[float] | None,
        model: str | None, *, fresh: bool = False,
    ) -> None:  # fmt: skip
        """Point ``rowid``'s vector at ``vector`` (or none) in every vec0 table."""
        if self._no_vec is not None:
            return
        if not fresh:
            for dim in list(self._vec_dims):
                db.execute(f"DELETE FROM memory_vec_{dim} WHERE rowid = ?", (rowid,))
        if vector is not None and model is not None:
            table = self._vec_table(db, len(vector))
            db.execute(
                f"INSERT INTO {table}(rowid, owner, model, embedding) VALUES (?, ?, ?, ?)",
                (rowid, owner, model, _pack(vector)),
            )

    # --- writes -------------------------------------------------------------------

    def _insert_one(
        self, db: Any, memory: NewMemory, vector: Sequence[float] | None, model: str | None
    ) -> bool:
        now = self._clock()
        blob = _pack(vector) if vector is not None else None
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
                 _pack(vector) if vector is not None else None, memory_id),
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
                 _pack(vector) if vector is not None else None, memory_id),
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
        if self._no_vec is not None:
            return await self._run(
                lambda db: self._scan(db, owner, vector, model, limit, where, args)
            )
        dim = len(vector)
        if dim not in self._vec_dims:
            return []
        # Over-fetch when filtering: vec0 filters on owner and model only.
        k = limit * 4 if where else limit
        sql = (
            f"SELECT m.id, v.distance FROM (SELECT rowid, distance FROM memory_vec_{dim}"
            " WHERE embedding MATCH ? AND k = ? AND owner = ? AND model = ?) v"
            f" JOIN memories m ON m.rowid = v.rowid WHERE 1 = 1{where} ORDER BY v.distance LIMIT ?"
        )
        rows = await self._run(
            lambda db: db.execute(sql, (_pack(vector), k, owner, model, *args, limit)).fetchall()
        )
        return [ScoredId(r[0], 1.0 - float(r[1])) for r in rows]

    def _scan(
        self, db: Any, owner: str, vector: Sequence[float], model: str, limit: int,
        where: str, args: list[Any],
    ) -> list[ScoredId]:  # fmt: skip
        rows = db.execute(
            "SELECT m.id, m.embedding FROM memories m WHERE m.owner = ? AND m.embedding_model = ?"
            f" AND m.dimension = ?{where}",
            (owner, model, len(vector), *args),
        ).fetchall()
        scored = [ScoredId(r[0], cosine(vector, _unpack(r[1]))) for r in rows]
        scored.sort(key=lambda s: (-s.score, s.id))
        return scored[:limit]

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
        if self._closed:
            return
        self._closed = True

        def close() -> None:
            self._conn.close()

        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, close)
        finally:
            self._pool.shutdown(wait=False)
