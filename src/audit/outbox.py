"""The durable local outbox: a SQLite file that holds events until a sink takes them.

Tables (one file, WAL, ``synchronous=FULL`` so a committed batch survives a
crash of the process or the machine; versioned, ``outbox_schema_version``, by
the migration runner every room uses, :mod:`exai.sqldb.migrations`):

- ``outbox``: events not yet accepted by the sink, in arrival order (``seq``).
- ``archive``: events the sink accepted, kept as a ring of the most recent
  ``archive_max_events`` so ``exai audit tail`` and ``exai audit replay`` have
  a local copy; delivery is idempotent on ``event_id``, so replaying is safe.
- ``quarantine``: events whose batch the sink rejected for good, with the reason.
- ``meta``: counters and state (shipped, dropped, last error, sink), so that
  ``exai audit status`` can read them from another process.

The size limit counts ``outbox`` plus ``quarantine``, the events not delivered:
past it, :meth:`AuditOutbox.append` drops the excess and counts it. This class
is synchronous and not thread-safe; :class:`~exai.audit.trail.AuditTrail` uses
it from one dedicated thread, the CLI directly.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from exai.audit.events import Row, encode_event
from exai.audit.outbox_sql import MIGRATIONS, Transaction, insert_rows
from exai.sqldb.migrations import migrate_sqlite_now
from exai.sqldb.thread import prepare_file

__all__ = ["AppendResult", "AuditOutbox", "OutboxRow", "OutboxStatus"]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    seq: int
    event_id: str
    ts: str
    kind: str
    body: str

    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class AppendResult:
    stored: int
    dropped: int


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    """What ``exai audit status`` shows; read from the file, so any process can."""

    path: str
    backlog: int
    oldest_ts: str | None
    shipped: int
    dropped: int
    quarantined: int
    archived: int
    last_error: str | None
    last_error_at: float | None
    last_shipped_at: float | None
    sink: str | None


class AuditOutbox:
    """One outbox file. Every write is a single transaction."""

    def __init__(
        self, path: Path, *, max_events: int, archive_max_events: int | None = None
    ) -> None:
        self.path = Path(path)
        self.max_events = max_events
        self.archive_max_events = max_events if archive_max_events is None else archive_max_events
        self._db: sqlite3.Connection | None = None
        self._pending = 0
        self._quarantined = 0

    # --- lifecycle ------------------------------------------------------------

    def open(self) -> None:
        connect = partial(sqlite3.connect, isolation_level=None, check_same_thread=False,
                          timeout=10.0)  # fmt: skip
        db = prepare_file(self.path, connect, ("journal_mode=WAL", "synchronous=FULL"))
        try:
            migrate_sqlite_now(db, "outbox_schema_version", MIGRATIONS)
        except BaseException:
            db.close()
            raise
        self._db = db
        self.refresh_counts()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("outbox is not open")
        return self._db

    def _transaction(self) -> Transaction:
        return Transaction(self.db)

    # --- counts ---------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Events waiting in ``outbox`` (as last counted or tracked)."""
        return self._pending

    @property
    def quarantined(self) -> int:
        return self._quarantined

    def refresh_counts(self) -> None:
        """Recount from the file, picking up rows other processes added."""
        self._pending = self.db.execute("SELECT count(*) FROM outbox").fetchone()[0]
        self._quarantined = self.db.execute("SELECT count(*) FROM quarantine").fetchone()[0]

    def oldest_ts(self) -> str | None:
        row = self.db.execute("SELECT ts FROM outbox ORDER BY seq LIMIT 1").fetchone()
        return row[0] if row else None

    # --- writing --------------------------------------------------------------

    def append(self, events: Sequence[dict[str, Any]], *, dropped_before: int = 0) -> AppendResult:
        """Store stamped events (:func:`~exai.audit.events.new_event`); see :meth:`append_rows`."""
        rows = [(e["event_id"], e["ts"], e["kind"], encode_event(e)) for e in events]
        return self.append_rows(rows, dropped_before=dropped_before)

    def append_rows(self, rows: Sequence[Row], *, dropped_before: int = 0) -> AppendResult:
        """Store encoded events in one transaction, up to the size limit.

        ``dropped_before`` adds events dropped before they got here (the
        in-memory buffer's own limit) to the persisted drop counter. A row
        whose ``event_id`` is already in the outbox is stored once.
        """
        room = max(0, self.max_events - self._pending - self._quarantined)
        accepted = rows[:room]
        dropped = len(rows) - len(accepted)
        with self._transaction() as db:
            before = db.total_changes
            insert_rows(db, "outbox (event_id, ts, kind, body)", 4, accepted)
            stored = db.total_changes - before
            if dropped + dropped_before:
                self._bump(db, "dropped", dropped + dropped_before)
        self._pending += stored
        return AppendResult(stored=stored, dropped=dropped + dropped_before)

    def archive_rows(self, rows: Sequence[Row], *, dropped_before: int = 0) -> AppendResult:
        """Store encoded events as delivered, in one transaction: for a trail with no sink.

        With no sink to ship to, delivery is the move to the archive, so the
        rows go there directly and are counted as shipped.
        """
        now = time.time()
        with self._transaction() as db:
            before = db.total_changes
            insert_rows(
                db, "archive (event_id, ts, kind, body, shipped_at)", 5,
                [(*row, now) for row in rows],
            )  # fmt: skip
            stored = db.total_changes - before
            self._bump(db, "shipped", stored)
            self._set(db, "last_shipped_at", now)
            if dropped_before:
                self._bump(db, "dropped", dropped_before)
            self._trim_archive(db)
        return AppendResult(stored=stored, dropped=dropped_before)

    def head(self, limit: int) -> list[OutboxRow]:
        """The oldest ``limit`` events, oldest first."""
        cursor = self.db.execute(
            "SELECT seq, event_id, ts, kind, body FROM outbox ORDER BY seq LIMIT ?", (limit,)
        )
        rows = [OutboxRow(*row) for row in cursor]
        if len(rows) < limit:
            self._pending = len(rows)
        return rows

    def acknowledge(self, batch: Sequence[OutboxRow]) -> None:
        """The sink accepted ``batch``: move it to the archive and count it shipped.

        A batch is always a run of the oldest rows, and ``seq`` only grows,
        so the range of its ``seq`` is exactly the batch.
        """
        if not batch:
            return
        first, last = batch[0].seq, batch[-1].seq
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO archive (event_id, ts, kind, body, shipped_at) "
                "SELECT event_id, ts, kind, body, ? FROM outbox "
                "WHERE seq BETWEEN ? AND ? ORDER BY seq",
                (time.time(), first, last),
            )
            removed = db.execute("DELETE FROM outbox WHERE seq BETWEEN ? AND ?", (first, last))
            self._bump(db, "shipped", removed.rowcount)
            self._set(db, "last_shipped_at", time.time())
            self._trim_archive(db)
        self._pending = max(0, self._pending - removed.rowcount)

    def quarantine(self, batch: Sequence[OutboxRow], reason: str) -> None:
        """The sink rejected ``batch`` for good: park it with the reason."""
        if not batch:
            return
        now = time.time()
        first, last = batch[0].seq, batch[-1].seq
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO quarantine "
                "(event_id, ts, kind, body, reason, quarantined_at) VALUES (?, ?, ?, ?, ?, ?)",
                [(r.event_id, r.ts, r.kind, r.body, reason, now) for r in batch],
            )
            removed = db.execute("DELETE FROM outbox WHERE seq BETWEEN ? AND ?", (first, last))
            self._set(db, "last_error", f"quarantined {len(batch)} events: {reason}")
            self._set(db, "last_error_at", now)
        self._pending = max(0, self._pending - removed.rowcount)
        self._quarantined += len(batch)

    def record_error(self, message: str) -> None:
        with self._transaction() as db:
            self._set(db, "last_error", message)
            self._set(db, "last_error_at", time.time())

    def set_state(self, name: str, value: Any) -> None:
        with self._transaction() as db:
            self._set(db, name, value)

    def _trim_archive(self, db: sqlite3.Connection) -> None:
        top = db.execute("SELECT max(seq) FROM archive").fetchone()[0]
        if top is not None and top > self.archive_max_events:
            db.execute("DELETE FROM archive WHERE seq <= ?", (top - self.archive_max_events,))

    @staticmethod
    def _bump(db: sqlite3.Connection, name: str, amount: int) -> None:
        db.execute(
            "INSERT INTO meta (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = coalesce(value, 0) + excluded.value",
            (name, amount),
        )

    @staticmethod
    def _set(db: sqlite3.Connection, name: str, value: Any) -> None:
        db.execute(
            "INSERT INTO meta (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )

    # --- operator views (exai audit) -------------------------------------------

    def meta(self) -> dict[str, Any]:
        return dict(self.db.execute("SELECT name, value FROM meta").fetchall())

    def status(self) -> OutboxStatus:
        self.refresh_counts()
        meta = self.meta()
        archived = self.db.execute("SELECT count(*) FROM archive").fetchone()[0]
        return OutboxStatus(
            path=str(self.path),
            backlog=self._pending,
            oldest_ts=self.oldest_ts(),
            shipped=int(meta.get("shipped") or 0),
            dropped=int(meta.get("dropped") or 0),
            quarantined=self._quarantined,
            archived=archived,
            last_error=meta.get("last_error"),
            last_error_at=meta.get("last_error_at"),
            last_shipped_at=meta.get("last_shipped_at"),
            sink=meta.get("sink"),
        )

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` events, shipped or not, oldest first, each once."""
        if limit <= 0:
            return []
        found: dict[str, tuple[str, str]] = {}
        for table in ("archive", "outbox"):
            for event_id, ts, body in self.db.execute(
                f"SELECT event_id, ts, body FROM {table} ORDER BY seq DESC LIMIT ?", (limit,)
            ):
                found[event_id] = (ts, body)
        newest = sorted(found.values(), key=lambda item: item[0])[-limit:]
        return [json.loads(body) for _, body in newest]

    def search(
        self, limit: int, *, kind: str | None = None, principal: str | None = None,
        text: str | None = None, before: str | None = None, after: str | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The newest ``limit`` events matching every filter given, newest first, each once.

        ``kind`` and ``principal`` match exactly; ``text`` anywhere in the event
        (case-insensitive); ``before`` keeps events older than that timestamp (the
        next page), ``after`` those at or after it. Shipped and unshipped events
        alike, like :meth:`recent`.
        """
        if limit <= 0:
            return []
        where, args = [], []
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if principal:
            where.append("json_extract(body, '$.principal') = ?")
            args.append(principal)
        if text:
            escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("lower(body) LIKE ? ESCAPE '\\'")
            args.append(f"%{escaped}%")
        if before:
            where.append("ts < ?")
            args.append(before)
        if after:
            where.append("ts >= ?")
            args.append(after)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        found: dict[str, tuple[str, str]] = {}
        for table in ("archive", "outbox"):
            sql = f"SELECT event_id, ts, body FROM {table}{clause} ORDER BY ts DESC LIMIT ?"
            for event_id, ts, body in self.db.execute(sql, (*args, limit)):
                found[event_id] = (ts, body)
        newest = sorted(found.values(), key=lambda item: item[0], reverse=True)[:limit]
        return [json.loads(body) for _, body in newest]

    def marks(self) -> tuple[int, int]:
        """The highest ``seq`` of ``outbox`` and ``archive``, for following new rows."""
        outbox = self.db.execute("SELECT coalesce(max(seq), 0) FROM outbox").fetchone()[0]
        archive = self.db.execute("SELECT coalesce(max(seq), 0) FROM archive").fetchone()[0]
        return outbox, archive

    def newer_than(self, marks: tuple[int, int]) -> tuple[list[dict[str, Any]], tuple[int, int]]:
        """Events added to either table after ``marks``, and the new marks."""
        events: list[tuple[str, str]] = []
        new_marks = []
        for table, mark in zip(("outbox", "archive"), marks, strict=True):
            rows = self.db.execute(
                f"SELECT seq, ts, body FROM {table} WHERE seq > ? ORDER BY seq", (mark,)
            ).fetchall()
            new_marks.append(rows[-1][0] if rows else mark)
            events += [(ts, body) for _, ts, body in rows]
        events.sort(key=lambda item: item[0])
        return [json.loads(body) for _, body in events], (new_marks[0], new_marks[1])

    def replay(self, since: str, until: str | None = None) -> int:
        """Queue archived events with ``since <= ts < until`` for delivery again."""
        with self._transaction() as db:
            before = db.total_changes
            db.execute(
                "INSERT OR IGNORE INTO outbox (event_id, ts, kind, body) "
                "SELECT event_id, ts, kind, body FROM archive "
                "WHERE ts >= ? AND (? IS NULL OR ts < ?) ORDER BY ts",
                (since, until, until),
            )
            queued = db.total_changes - before
        self.refresh_counts()
        return queued

    def quarantined_rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        cursor = self.db.execute(
            "SELECT event_id, ts, kind, reason, quarantined_at, body FROM quarantine "
            "ORDER BY ts LIMIT ?",
            (-1 if limit is None else limit,),
        )
        names = ("event_id", "ts", "kind", "reason", "quarantined_at", "body")
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def resend(self, event_ids: Iterable[str] | None = None) -> int:
        """Move quarantined events (all, or those named) back into the outbox."""
        ids = None if event_ids is None else list(event_ids)
        with self._transaction() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS picked (event_id TEXT PRIMARY KEY)")
            db.execute("DELETE FROM picked")
            if ids is None:
                db.execute("INSERT INTO picked SELECT event_id FROM quarantine")
            else:
                db.executemany("INSERT OR IGNORE INTO picked VALUES (?)", [(i,) for i in ids])
            db.execute(
                "INSERT OR IGNORE INTO outbox (event_id, ts, kind, body) "
                "SELECT event_id, ts, kind, body FROM quarantine "
                "WHERE event_id IN (SELECT event_id FROM picked) ORDER BY ts"
            )
            moved = db.execute(
                "DELETE FROM quarantine WHERE event_id IN (SELECT event_id FROM picked)"
            ).rowcount
        self.refresh_counts()
        return moved
