"""The conversation store's rules, written once in SQL both backends understand.

:class:`SqlStore` holds every rule of :class:`~exai.store.base.ConversationStore`
(ownership, expiry, idempotent appends, turn and fork limits); a backend only
supplies connections through :meth:`SqlStore._read` and :meth:`SqlStore._write`
and a :class:`~exai.store.executor.Dialect`; forks and imports lean on
:mod:`exai.store.lineage`.

An append reads the thread row inside the write transaction (``FOR UPDATE`` on
Postgres, ``BEGIN IMMEDIATE`` on SQLite) before choosing its ``seq`` numbers, so
concurrent appends to one thread, from one process or several, queue behind each
other and never collide.

Every stored turn claims its request's key, (owner, session_id, request_id), in
``request_turns``, with the fingerprint of the call and the ``seq`` range it
wrote. The key is looked up before anything is written: the same call again gets
the turn it stored, another call under the key is refused. Two writers racing
for one key (a thread being started twice at once) cannot both claim it; the
loser's transaction is rolled back and run again, and then finds the winner's turn.
"""

from __future__ import annotations

import time
import uuid
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from exai.errors import ConversationNotFoundError, RequestIdReusedError, ValidationError_
from exai.logs import get_logger
from exai.store.base import (
    ANY_OWNER,
    Artifact,
    ConversationStore,
    Owner,
    StoredMessage,
    StoreLimits,
    Thread,
    ThreadContext,
    VendorUpload,
)
from exai.store.costs import CostAccounts
from exai.store.executor import Dialect, Executor
from exai.store.lineage import ancestry_depth, check_depth, check_fork_point, restore_rows
from exai.store.responses import ResponseRows
from exai.store.rows import (
    MESSAGE_COLUMNS,
    MESSAGE_INSERT_COLUMNS,
    THREAD_COLUMNS,
    check_thread_id,
    context_columns,
    context_message,
    decode_message,
    decode_thread,
    dumps,
    encode_turn,
    expired_error,
    loads,
    not_found_error,
    thread_row,
)
from exai.store.tokens import FAMILIES

__all__ = ["SqlStore"]

_MAX_PAGE = 2**31 - 1


_THREAD = f"SELECT {THREAD_COLUMNS} FROM {{p}}threads WHERE id = ?"
_MESSAGES = f"SELECT {MESSAGE_COLUMNS} FROM {{p}}messages WHERE thread_id = ?"
_INSERT_MESSAGE = (
    f"INSERT INTO {{p}}messages ({MESSAGE_INSERT_COLUMNS})"
    f" VALUES ({', '.join('?' * (MESSAGE_INSERT_COLUMNS.count(',') + 1))})"
)
_INSERT_THREAD = (
    f"INSERT INTO {{p}}threads ({THREAD_COLUMNS})"
    f" VALUES ({', '.join('?' * (THREAD_COLUMNS.count(',') + 1))})"
)
_UPSERT_FILE = (
    "INSERT INTO {p}thread_files (thread_id, path, last_seq) VALUES (?, ?, ?)"
    " ON CONFLICT (thread_id, path) DO UPDATE SET last_seq = excluded.last_seq"
)
_THREAD_SELECT = f"SELECT {THREAD_COLUMNS} FROM {{p}}threads"
_REQUEST = (
    "SELECT thread_id, fingerprint, first_seq, last_seq FROM {p}request_turns"
    " WHERE owner = ? AND session_id = ? AND request_id = ?"
)
_UPLOAD = (
    "SELECT owner, provider, sha256, file_id, content, size, created_at FROM {p}vendor_uploads"
    " WHERE owner = ? AND provider = ? AND sha256 = ?"
)
_PUT_UPLOAD = (
    "INSERT INTO {p}vendor_uploads (owner, provider, sha256, file_id, content, size, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_CLAIM_REQUEST = (
    "INSERT INTO {p}request_turns"
    " (owner, session_id, request_id, fingerprint, thread_id, first_seq, last_seq)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)

T = TypeVar("T")
Body = Callable[[Executor], Awaitable[T]]


@dataclass(frozen=True, slots=True)
class _Turn:
    """What one append stores, as the caller gave it."""

    messages: Sequence[Mapping[str, Any]]
    request_id: str
    session_id: str
    fingerprint: str
    model: str | None
    provider: str | None
    usage: Mapping[str, Any] | None
    files: Sequence[str] | None


class _KeyTaken(Exception):
    """A concurrent transaction claimed the request's key first; run again to find its turn."""


class SqlStore(CostAccounts, ResponseRows, ConversationStore):
    """Everything a conversation store does, over any :class:`Executor`, the
    per-call cost rows kept beside the conversations (:class:`CostAccounts`), and
    the Responses API's stored responses (:class:`ResponseRows`)."""

    dialect: Dialect

    def __init__(self, limits: StoreLimits, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self._clock = clock
        self._log = get_logger("exai.store")

    # Every operation is a function of a connection handed to _read or _write,
    # rather than a block inside a context manager, so that a backend can run the
    # whole function where its connection lives: SQLite runs it on its connection's
    # thread in one step instead of one thread hop per statement. A body therefore
    # awaits nothing but the Executor it is given.

    @abstractmethod
    async def _read(self, body: Body[T]) -> T:
        """Run ``body`` on a connection that sees committed data."""

    @abstractmethod
    async def _write(self, body: Body[T]) -> T:
        """Run ``body`` in a transaction that serializes writers; commit if it returns."""

    def _q(self, template: str) -> str:
        return self.dialect.sql(template)

    async def _owned(
        self, db: Executor, thread_id: str, owner: Owner, *, lock: bool = False
    ) -> tuple[Thread, int]:
        """The thread and its size in characters, if ``owner`` may see it."""
        sql = self._q(_THREAD) + (self.dialect.lock_row if lock else "")
        row = await db.fetchrow(sql, thread_id)
        if row is None or row[8] is not None or (owner is not ANY_OWNER and row[1] != owner):
            raise not_found_error(thread_id)
        thread = decode_thread(row, self.limits.ttl_s)
        if thread.expires_at <= self._clock():
            raise expired_error(thread)
        return thread, row[11]

    # --- threads ----------------------------------------------------------

    async def create_thread(
        self,
        owner: str,
        title: str | None = None,
        parent_id: str | None = None,
        fork_point: int | None = None,
    ) -> Thread:
        if not isinstance(owner, str) or not owner:
            raise ValidationError_("a thread needs an owner principal")
        now = self._clock()
        thread = Thread(id=str(uuid.uuid4()), owner=owner, title=title, created_at=now,
                        updated_at=now, expires_at=now + self.limits.ttl_s)  # fmt: skip

        async def body(tx: Executor) -> Thread:
            created = thread
            if parent_id is not None:
                parent, _ = await self._owned(tx, check_thread_id(parent_id), owner)
                if fork_point is not None and not 0 <= fork_point <= parent.last_seq:
                    raise ValidationError_(f"fork_point must be within 0..{parent.last_seq}")
                depth = await ancestry_depth(tx, self.dialect, parent.id, thread.id,
                                             self.limits.fork_max_depth)  # fmt: skip
                check_depth(depth, parent.id, self.limits, self._log)
                created = replace(thread, parent_id=parent.id, fork_point=fork_point, depth=depth)
            await tx.execute(self._q(_INSERT_THREAD), *thread_row(created, 0))
            return created

        return await self._write(body)

    async def get_thread(self, thread_id: str, owner: Owner) -> Thread:
        tid = check_thread_id(thread_id)

        async def body(db: Executor) -> Thread:
            thread, _ = await self._owned(db, tid, owner)
            return thread

        return await self._read(body)

    async def list_threads(
        self,
        owner: Owner | None = None,
        *,
        include_deleted: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Thread]:
        where: list[str] = []
        args: list[Any] = []
        if owner is not None and owner is not ANY_OWNER:
            where.append("owner = ?")
            args.append(owner)
        if not include_deleted:
            where.append("deleted_at IS NULL AND updated_at > ?")
            args.append(self._clock() - self.limits.ttl_s)
        sql = _THREAD_SELECT + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY updated_at DESC, id LIMIT ? OFFSET ?"
        rows = await self._read(lambda db: db.fetch(self._q(sql), *args, limit, offset))
        return [decode_thread(row, self.limits.ttl_s) for row in rows]

    async def delete(self, thread_id: str, owner: Owner) -> None:
        tid = check_thread_id(thread_id)

        async def body(tx: Executor) -> None:
            await self._owned(tx, tid, owner, lock=True)
            await tx.execute(self._q("UPDATE {p}threads SET deleted_at = ? WHERE id = ?"),
                             self._clock(), tid)  # fmt: skip

        await self._write(body)

    async def prune(self, now: float | None = None) -> int:
        cutoff = (self._clock() if now is None else now) - self.limits.ttl_s
        sql = self._q("DELETE FROM {p}threads WHERE deleted_at IS NOT NULL OR updated_at <= ?")
        threads: int = await self._write(lambda tx: tx.execute(sql, cutoff))
        await self.prune_responses(now)
        return threads

    # --- messages ---------------------------------------------------------

    async def append(
        self,
        thread_id: str,
        owner: Owner,
        messages: Sequence[Mapping[str, Any]],
        *,
        request_id: str,
        session_id: str = "",
        fingerprint: str = "",
        model: str | None = None,
        provider: str | None = None,
        usage: Mapping[str, Any] | None = None,
        files: Sequence[str] | None = None,
    ) -> list[StoredMessage]:
        tid = check_thread_id(thread_id)
        turn = _Turn(messages, request_id, session_id, fingerprint, model, provider, usage, files)

        async def body(tx: Executor) -> list[StoredMessage]:
            thread, chars = await self._owned(tx, tid, owner, lock=True)
            done = await self._done(tx, thread.owner, session_id, request_id, fingerprint)
            if done is not None:
                if done[0] != tid:  # the key made a turn of another thread
                    raise RequestIdReusedError(request_id)
                return done[1]
            return await self._append_in(tx, thread, chars, turn)

        return await self._claiming(body)

    async def start_thread(
        self,
        owner: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        title: str | None = None,
        request_id: str,
        session_id: str = "",
        fingerprint: str = "",
        model: str | None = None,
        provider: str | None = None,
        usage: Mapping[str, Any] | None = None,
        files: Sequence[str] | None = None,
    ) -> tuple[Thread, list[StoredMessage]]:
        if not isinstance(owner, str) or not owner:
            raise ValidationError_("a thread needs an owner principal")
        turn = _Turn(messages, request_id, session_id, fingerprint, model, provider, usage, files)

        async def body(tx: Executor) -> tuple[Thread, list[StoredMessage]]:
            done = await self._done(tx, owner, session_id, request_id, fingerprint)
            if done is not None:
                started, _ = await self._owned(tx, done[0], owner)
                return started, done[1]
            now = self._clock()
            thread = Thread(id=str(uuid.uuid4()), owner=owner, title=title, created_at=now,
                            updated_at=now, expires_at=now + self.limits.ttl_s)  # fmt: skip
            await tx.execute(self._q(_INSERT_THREAD), *thread_row(thread, 0))
            stored = await self._append_in(tx, thread, 0, turn)
            return replace(thread, turns=1, last_seq=len(stored)), stored

        return await self._claiming(body)

    async def find_turn(
        self, owner: str, request_id: str, *, session_id: str = "", fingerprint: str = ""
    ) -> tuple[Thread, list[StoredMessage]] | None:
        async def body(db: Executor) -> tuple[Thread, list[StoredMessage]] | None:
            done = await self._done(db, owner, session_id, request_id, fingerprint)
            if done is None:
                return None
            thread, _ = await self._owned(db, done[0], owner)
            return thread, done[1]

        return await self._read(body)

    async def _claiming(self, body: Body[T]) -> T:
        """Run a write that claims a request's key, once more if another claimed it first."""
        try:
            return await self._write(body)
        except _KeyTaken:
            return await self._write(body)

    async def _done(
        self, db: Executor, owner: str, session_id: str, request_id: str, fingerprint: str
    ) -> tuple[str, list[StoredMessage]] | None:
        """The thread id and messages of the turn this request's key stored, or None.

        Raises :class:`RequestIdReusedError` when the key stored a different call.
        """
        row = await db.fetchrow(self._q(_REQUEST), owner, session_id, request_id)
        if row is None:
            return None
        thread_id, stored_fingerprint, first_seq, last_seq = row
        if stored_fingerprint != fingerprint:
            raise RequestIdReusedError(request_id)
        rows = await db.fetch(self._q(_MESSAGES + " AND seq BETWEEN ? AND ? ORDER BY seq"),
                              thread_id, first_seq, last_seq)  # fmt: skip
        return thread_id, [decode_message(r) for r in rows]

    async def _append_in(
        self, tx: Executor, thread: Thread, chars: int, new: _Turn
    ) -> list[StoredMessage]:
        """Store ``new`` after everything in ``thread``, and claim its key, inside ``tx``."""
        tid = thread.id
        if thread.turns >= self.limits.max_turns:
            raise ValidationError_(
                f"conversation {tid} has reached its limit of {self.limits.max_turns} "
                "turns; fork it or start a new conversation by omitting continuation_id",
                details={"max_turns": self.limits.max_turns},
            )
        now = self._clock()
        first, last = thread.last_seq + 1, thread.last_seq + len(new.messages)
        turn = encode_turn(
            new.messages, thread_id=tid, first_seq=first, turn=thread.turns + 1,
            chars_before=chars, request_id=new.request_id, now=now, model=new.model,
            provider=new.provider, usage=new.usage, files=new.files,
        )  # fmt: skip
        claimed = await tx.execute(
            self._q(_CLAIM_REQUEST), thread.owner, new.session_id, new.request_id,
            new.fingerprint, tid, first, last,
        )  # fmt: skip
        if not claimed:
            raise _KeyTaken
        await tx.executemany(self._q(_INSERT_MESSAGE), turn.rows)
        await tx.execute(
            self._q("UPDATE {p}threads SET turns = ?, last_seq = ?, total_chars = ?,"
                    " updated_at = ? WHERE id = ?"),
            thread.turns + 1, last, chars + turn.chars, now, tid,
        )  # fmt: skip
        if new.files:
            await tx.executemany(
                self._q(_UPSERT_FILE), [(tid, path, first) for path in dict.fromkeys(new.files)]
            )
        return turn.messages

    async def messages(
        self, thread_id: str, owner: Owner, limit: int | None = None
    ) -> list[StoredMessage]:
        tid = check_thread_id(thread_id)

        async def body(db: Executor) -> Sequence[Sequence[Any]]:
            thread, _ = await self._owned(db, tid, owner)
            after = 0 if limit is None else max(0, thread.last_seq - max(0, limit))
            return await db.fetch(self._q(_MESSAGES + " AND seq > ? ORDER BY seq"), tid, after)

        return [decode_message(row) for row in await self._read(body)]

    async def load_context(
        self,
        thread_id: str,
        owner: Owner,
        *,
        max_chars: int | None = None,
        family: str = "generic",
    ) -> ThreadContext:
        tid = check_thread_id(thread_id)
        if family not in FAMILIES:
            raise ValueError(f"unknown tokenizer family {family!r}")

        async def body(db: Executor) -> ThreadContext:
            thread, chars = await self._owned(db, tid, owner)
            start = 1
            if max_chars is not None and chars > max_chars:
                row = await db.fetchrow(
                    self._q("SELECT seq FROM {p}messages WHERE thread_id = ?"
                            " AND turn_chars_before >= ? ORDER BY turn_chars_before, seq LIMIT 1"),
                    tid, chars - max_chars,
                )  # fmt: skip
                start = thread.last_seq + 1 if row is None else row[0]
            rows: Sequence[Sequence[Any]] = []
            if start <= thread.last_seq:
                sql = (f"SELECT {context_columns(family)} FROM {{p}}messages"
                       " WHERE thread_id = ? AND seq >= ? ORDER BY seq")  # fmt: skip
                rows = await db.fetch(self._q(sql), tid, start)
            files = await db.fetch(
                self._q("SELECT path FROM {p}thread_files WHERE thread_id = ?"
                        " ORDER BY last_seq DESC, path"), tid)  # fmt: skip
            return ThreadContext(
                thread,
                messages=[context_message(row) for row in rows],
                turns=[row[0] for row in rows],
                tokens=[row[1] for row in rows],
                files=[row[0] for row in files],
            )

        return await self._read(body)

    async def fork(self, thread_id: str, owner: Owner, at_seq: int | None = None) -> Thread:
        tid = check_thread_id(thread_id)
        now = self._clock()
        new_id = str(uuid.uuid4())

        async def body(tx: Executor) -> Thread:
            source, _ = await self._owned(tx, tid, owner, lock=True)
            at = source.last_seq if at_seq is None else at_seq
            if not 0 <= at <= source.last_seq:
                raise ValidationError_(f"--at must be within 0..{source.last_seq}")
            depth = await ancestry_depth(tx, self.dialect, source.id, new_id,
                                         self.limits.fork_max_depth)  # fmt: skip
            check_depth(depth, source.id, self.limits, self._log)
            await check_fork_point(tx, self.dialect, tid, at)
            stats = await tx.fetchrow(
                self._q("SELECT COALESCE(MAX(turn), 0), COALESCE(SUM(chars), 0)"
                        " FROM {p}messages WHERE thread_id = ? AND seq <= ?"), tid, at)  # fmt: skip
            assert stats is not None
            fork = Thread(
                id=new_id, owner=source.owner, title=source.title, created_at=now,
                updated_at=now, expires_at=now + self.limits.ttl_s, parent_id=source.id,
                fork_point=at, depth=depth, turns=int(stats[0]), last_seq=at,
            )  # fmt: skip
            await tx.execute(self._q(_INSERT_THREAD), *thread_row(fork, int(stats[1])))
            await tx.execute(
                self._q(f"INSERT INTO {{p}}messages ({MESSAGE_INSERT_COLUMNS})"
                        f" SELECT ?, {MESSAGE_INSERT_COLUMNS.split(', ', 1)[1]}"
                        " FROM {p}messages WHERE thread_id = ? AND seq <= ?"),
                new_id, tid, at,
            )  # fmt: skip
            refs = await tx.fetch(
                self._q("SELECT seq, files FROM {p}messages WHERE thread_id = ? AND seq <= ?"
                        " AND files IS NOT NULL"), tid, at)  # fmt: skip
            latest = {path: seq for seq, files in refs for path in loads(files)}
            if latest:
                await tx.executemany(self._q(_UPSERT_FILE),
                                     [(new_id, p, s) for p, s in latest.items()])  # fmt: skip
            return fork

        return await self._write(body)

    async def import_thread(self, thread: Thread, messages: Sequence[StoredMessage]) -> Thread:
        tid = check_thread_id(thread.id)
        restoring = restore_rows(tid, messages)

        async def body(tx: Executor) -> Thread:
            if await tx.fetchrow(self._q("SELECT 1 FROM {p}threads WHERE id = ?"), tid):
                raise ValidationError_(f"conversation {tid} already exists")
            depth = 0
            if thread.parent_id is not None:
                depth = await ancestry_depth(tx, self.dialect, thread.parent_id, tid,
                                             self.limits.fork_max_depth)  # fmt: skip
                parent = await tx.fetchrow(self._q("SELECT 1 FROM {p}threads WHERE id = ?"),
                                           thread.parent_id)  # fmt: skip
                if parent is None:
                    raise ValidationError_(
                        f"conversation {tid}: parent {thread.parent_id} is not in the store; "
                        "import the parent first"
                    )
            restored = replace(thread, id=tid, depth=depth, turns=restoring.turns,
                               last_seq=restoring.last_seq,
                               expires_at=thread.updated_at + self.limits.ttl_s)  # fmt: skip
            await tx.execute(self._q(_INSERT_THREAD), *thread_row(restored, restoring.chars))
            if restoring.rows:
                await tx.executemany(self._q(_INSERT_MESSAGE), restoring.rows)
            if restoring.files:
                await tx.executemany(self._q(_UPSERT_FILE),
                                     [(tid, p, s) for p, s in restoring.files.items()])  # fmt: skip
            return restored

        return await self._write(body)

    # --- state and artifacts ---------------------------------------------

    async def _live(self, db: Executor, thread_id: str) -> str:
        tid = check_thread_id(thread_id)
        row = await db.fetchrow(self._q("SELECT deleted_at FROM {p}threads WHERE id = ?"), tid)
        if row is None or row[0] is not None:
            raise not_found_error(tid)
        return tid

    async def get_state(self, thread_id: str, key: str) -> dict[str, Any] | None:
        sql = self._q("SELECT value FROM {p}thread_state WHERE thread_id = ? AND key = ?")
        tid = check_thread_id(thread_id)
        row = await self._read(lambda db: db.fetchrow(sql, tid, key))
        return None if row is None else loads(row[0])

    async def put_state(self, thread_id: str, key: str, value: Mapping[str, Any]) -> None:
        try:
            encoded = dumps(dict(value))
        except (TypeError, ValueError) as exc:
            raise ValidationError_(f"state {key!r} is not JSON-serializable: {exc}") from None

        async def body(tx: Executor) -> None:
            tid = await self._live(tx, thread_id)
            await tx.execute(
                self._q("INSERT INTO {p}thread_state (thread_id, key, value, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (thread_id, key) DO UPDATE"
                        " SET value = excluded.value, updated_at = excluded.updated_at"),
                tid, key, encoded, self._clock(),
            )  # fmt: skip

        await self._write(body)

    async def put_artifact(
        self, thread_id: str, content: str, meta: Mapping[str, Any] | None = None
    ) -> str:
        if not isinstance(content, str):
            raise ValidationError_("an artifact's content must be text")
        artifact_id = str(uuid.uuid4())

        async def body(tx: Executor) -> None:
            tid = await self._live(tx, thread_id)
            await tx.execute(
                self._q("INSERT INTO {p}artifacts (id, thread_id, content, meta, size, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)"),
                artifact_id, tid, content, dumps(dict(meta or {})), len(content), self._clock(),
            )  # fmt: skip

        await self._write(body)
        return artifact_id

    async def get_artifact(
        self,
        thread_id: str,
        artifact_id: str,
        owner: Owner,
        *,
        offset: int = 0,
        limit: int | None = None,
    ) -> Artifact:
        if offset < 0 or (limit is not None and limit < 0):
            raise ValidationError_("offset and limit must not be negative")
        tid = check_thread_id(thread_id)

        async def body(db: Executor) -> Sequence[Any] | None:
            await self._owned(db, tid, owner)
            return await db.fetchrow(
                self._q("SELECT id, thread_id, substr(content, ?, ?), size, meta, created_at"
                        " FROM {p}artifacts WHERE id = ? AND thread_id = ?"),
                offset + 1, _MAX_PAGE if limit is None else limit, str(artifact_id), tid,
            )  # fmt: skip

        row = await self._read(body)
        if row is None:
            raise ConversationNotFoundError(
                f"artifact {artifact_id} is not part of conversation {tid}",
                details={"continuation_id": tid, "artifact_id": str(artifact_id)},
            )
        return Artifact(id=row[0], thread_id=row[1], content=row[2], offset=offset,
                        size=row[3], meta=loads(row[4]), created_at=row[5])  # fmt: skip

    # --- vendor uploads -----------------------------------------------------

    async def get_upload(self, owner: str, provider: str, sha256: str) -> VendorUpload | None:
        sql = self._q(_UPLOAD)
        row = await self._read(lambda db: db.fetchrow(sql, owner, provider, sha256))
        return None if row is None else VendorUpload(*row)

    async def put_upload(self, upload: VendorUpload) -> VendorUpload:
        async def body(tx: Executor) -> Sequence[Any] | None:
            await tx.execute(
                self._q(_PUT_UPLOAD), upload.owner, upload.provider, upload.sha256,
                upload.file_id, upload.content, upload.size, upload.created_at,
            )  # fmt: skip
            return await tx.fetchrow(self._q(_UPLOAD), upload.owner, upload.provider,
                                     upload.sha256)  # fmt: skip

        row = await self._write(body)
        return upload if row is None else VendorUpload(*row)
