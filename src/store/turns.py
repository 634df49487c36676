"""Turns in the SQL conversation store: appending them, idempotently, and reading
them back whole or as the context of a provider call.

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

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from exai.errors import RequestIdReusedError, ValidationError_
from exai.sqldb.executor import Executor
from exai.store.base import Owner, StoredMessage, Thread, ThreadContext
from exai.store.rows import (
    check_thread_id,
    context_columns,
    context_message,
    decode_message,
    encode_turn,
    thread_row,
)
from exai.store.sql_base import (
    INSERT_MESSAGE,
    INSERT_THREAD,
    MESSAGES,
    UPSERT_FILE,
    Body,
    SqlBase,
    T,
)
from exai.store.tokens import FAMILIES

__all__ = ["TurnRows"]

_REQUEST = (
    "SELECT thread_id, fingerprint, first_seq, last_seq FROM {p}request_turns"
    " WHERE owner = ? AND session_id = ? AND request_id = ?"
)
_CLAIM_REQUEST = (
    "INSERT INTO {p}request_turns"
    " (owner, session_id, request_id, fingerprint, thread_id, first_seq, last_seq)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


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


class TurnRows(SqlBase):
    """The messages of threads, the files they name, and the request keys of turns."""

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
            await tx.execute(self._q(INSERT_THREAD), *thread_row(thread, 0))
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
        rows = await db.fetch(self._q(MESSAGES + " AND seq BETWEEN ? AND ? ORDER BY seq"),
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
        await tx.executemany(self._q(INSERT_MESSAGE), turn.rows)
        await tx.execute(
            self._q("UPDATE {p}threads SET turns = ?, last_seq = ?, total_chars = ?,"
                    " updated_at = ? WHERE id = ?"),
            thread.turns + 1, last, chars + turn.chars, now, tid,
        )  # fmt: skip
        if new.files:
            await tx.executemany(
                self._q(UPSERT_FILE), [(tid, path, first) for path in dict.fromkeys(new.files)]
            )
        return turn.messages

    async def messages(
        self, thread_id: str, owner: Owner, limit: int | None = None
    ) -> list[StoredMessage]:
        tid = check_thread_id(thread_id)

        async def body(db: Executor) -> Sequence[Sequence[Any]]:
            thread, _ = await self._owned(db, tid, owner)
            after = 0 if limit is None else max(0, thread.last_seq - max(0, limit))
            return await db.fetch(self._q(MESSAGES + " AND seq > ? ORDER BY seq"), tid, after)

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
