"""sqlite-vec for the SQLite memory store: loading the extension, and the vector tables.

sqlite-vec is a loadable extension, which must be loaded into the connection that
queries it. Loading one needs a ``sqlite3`` module built with
``enable_load_extension``; some Python builds (pyenv's default among them) leave it
out, so the bundled ``pysqlite3`` is preferred when installed, then the standard
library's. :func:`connect_sqlite` says why it could not load the extension when
it could not; the store then searches vectors by a scan (:func:`scan`).

Vectors go into one ``vec0`` table per dimension (:class:`VecTables`),
partitioned by owner, so a search reads only that principal's vectors, with the
model as a metadata column, so a search compares vectors of one model only. Each
vector is also kept as a float32 blob in ``memories`` (:func:`pack`), which the
scan reads and from which a table could be rebuilt.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from exai.memory.base import ScoredId
from exai.memory.ranking import cosine

__all__ = ["VecTables", "connect_sqlite", "pack", "scan", "unpack"]

_OPTIONS: dict[str, Any] = {"isolation_level": None, "check_same_thread": False, "timeout": 10.0}


def connect_sqlite(path: str, load_vec: bool = True) -> tuple[Any, str | None]:
    """A connection with sqlite-vec loaded if possible, and why not otherwise."""
    if not load_vec:
        import sqlite3

        conn = sqlite3.connect(path, **_OPTIONS)
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
        conn = module.connect(path, **_OPTIONS)
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


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def scan(
    db: Any, owner: str, vector: Sequence[float], model: str, limit: int,
    where: str, args: list[Any],
) -> list[ScoredId]:  # fmt: skip
    """The nearest of ``owner``'s vectors of ``model``, compared one by one in Python:
    the search when sqlite-vec cannot be loaded. ``where`` filters ``m.`` columns."""
    rows = db.execute(
        "SELECT m.id, m.embedding FROM memories m WHERE m.owner = ? AND m.embedding_model = ?"
        f" AND m.dimension = ?{where}",
        (owner, model, len(vector), *args),
    ).fetchall()
    scored = [ScoredId(r[0], cosine(vector, unpack(r[1]))) for r in rows]
    scored.sort(key=lambda s: (-s.score, s.id))
    return scored[:limit]


class VecTables:
    """The ``vec0`` tables, one per dimension, made when a vector of a new size arrives."""

    def __init__(self) -> None:
        self.dims: set[int] = set()

    def load(self, db: Any) -> None:
        """Learn the tables an earlier run made."""
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'memory_vec_%' AND type = 'table'"
        ).fetchall():
            suffix = name.removeprefix("memory_vec_")
            if suffix.isdigit():
                self.dims.add(int(suffix))

    def table(self, db: Any, dimension: int) -> str:
        name = f"memory_vec_{int(dimension)}"
        if dimension not in self.dims:
            db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
                f"owner text partition key, model text, embedding float[{int(dimension)}]"
                " distance_metric=cosine)"
            )
            self.dims.add(dimension)
        return name

    def put(
        self, db: Any, rowid: int, owner: str, vector: Sequence[float] | None,
        model: str | None, *, fresh: bool = False,
    ) -> None:  # fmt: skip
        """Point ``rowid``'s vector at ``vector`` (or none) in every table.

        ``fresh``: the row is new, so no table holds it yet.
        """
        if not fresh:
            for dim in list(self.dims):
                db.execute(f"DELETE FROM memory_vec_{dim} WHERE rowid = ?", (rowid,))
        if vector is not None and model is not None:
            db.execute(
                f"INSERT INTO {self.table(db, len(vector))}(rowid, owner, model, embedding)"
                " VALUES (?, ?, ?, ?)",
                (rowid, owner, model, pack(vector)),
            )

    def search(
        self, db: Any, owner: str, vector: Sequence[float], model: str, limit: int,
        where: str, args: list[Any],
    ) -> list[ScoredId]:  # fmt: skip
        """The nearest of ``owner``'s vectors of ``model`` through the dimension's table."""
        dim = len(vector)
        if dim not in self.dims:
            self.load(db)  # another process (`exai memory`) may have made it since
            if dim not in self.dims:
                return []
        # Over-fetch when filtering: vec0 filters on owner and model only.
        k = limit * 4 if where else limit
        sql = (
            f"SELECT m.id, v.distance FROM (SELECT rowid, distance FROM memory_vec_{dim}"
            " WHERE embedding MATCH ? AND k = ? AND owner = ? AND model = ?) v"
            f" JOIN memories m ON m.rowid = v.rowid WHERE 1 = 1{where} ORDER BY v.distance LIMIT ?"
        )
        rows = db.execute(sql, (pack(vector), k, owner, model, *args, limit)).fetchall()
        return [ScoredId(r[0], 1.0 - float(r[1])) for r in rows]
