"""Agent sessions kept as threads: what a model-face request continues, and its turn.

An agent on a model face sends its whole history with every request and keeps no
id of exai's. After each answer, :meth:`SessionRows.keep_session_turn` finds the
thread the request continues and stores the request's new messages and the answer
as that thread's next turn, in one write transaction:

- each stored turn leaves two *heads* in ``session_heads``: the digest of the
  conversation after its answer (what the agent's next request starts with), and
  the digest of its whole input (what a retry of the same request sends again);
  see :mod:`exai.store.session_keys`;
- a request whose whole input is a stored turn's is a **retry**: nothing is
  written but a head for the answer this attempt got, so that the agent's next
  request, which carries that answer, continues the same thread;
- otherwise the longest head the request starts with names the thread. At the
  thread's end the request **continues** it; at an earlier turn (two requests
  extending one prefix: a parallel branch, an edited message) it **branches**: a
  fork of the thread up to that head, still the agent's session, takes the turn;
- a request that starts with no head **starts** a thread. When the client sent a
  session reference of its own and a thread of that reference exists, the new
  thread *follows* it (the client rewrote its history: compaction, a cleared
  context), which the console shows as its lineage.

Heads are per principal (the digest chain starts from the principal's name, and
every lookup is by owner), so two principals with identical histories keep two
threads. They go with their thread when it is pruned. One principal's turns are
kept one at a time, on every daemon (on Postgres a row of ``session_owners`` locked
until the transaction ends; SQLite has one writer), so each keeping sees what the
one before it wrote. Turns are kept in batches, one transaction each
(:meth:`SessionRows.keep_session_turns`). Daemons may
still keep a session's turns out of order (the agent's next request reached
another daemon, whose keeper was first): a turn also leaves heads for the answers
among its own messages, so the earlier request, kept afterwards, finds its answer
already kept. Schema version 10.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from exai.errors import ConversationNotFoundError, ExaiError
from exai.sqldb.executor import Executor
from exai.store.base import Thread
from exai.store.rows import THREAD_COLUMNS, decode_thread, thread_row
from exai.store.session_keys import BoundaryCache, answer_digest, input_digest
from exai.store.session_turns import Kept, SessionKept, SessionTurn
from exai.store.sql_base import INSERT_THREAD, SqlBase
from exai.store.turns import _CLAIM_REQUEST, TurnRows, _Turn

__all__ = ["POSTGRES_TABLES", "SQLITE_TABLES", "SessionKept", "SessionRows", "SessionTurn"]

SQLITE_TABLES = """
ALTER TABLE threads ADD COLUMN face TEXT;
ALTER TABLE threads ADD COLUMN client TEXT;
ALTER TABLE threads ADD COLUMN session_ref TEXT;
ALTER TABLE threads ADD COLUMN follows TEXT;
CREATE INDEX threads_session_ref ON threads(owner, session_ref, updated_at)
    WHERE session_ref IS NOT NULL;
CREATE INDEX threads_follows ON threads(follows) WHERE follows IS NOT NULL;
CREATE TABLE session_heads (
    owner TEXT NOT NULL,
    digest TEXT NOT NULL,
    thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    PRIMARY KEY (owner, digest, thread_id)
) WITHOUT ROWID;
CREATE INDEX session_heads_thread ON session_heads(thread_id);
CREATE TABLE session_owners (owner TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE INDEX call_costs_request ON call_costs(principal, session_id, request_id);
"""

POSTGRES_TABLES = """
ALTER TABLE {s}.threads ADD COLUMN face text;
ALTER TABLE {s}.threads ADD COLUMN client text;
ALTER TABLE {s}.threads ADD COLUMN session_ref text;
ALTER TABLE {s}.threads ADD COLUMN follows text;
CREATE INDEX threads_session_ref ON {s}.threads(owner, session_ref, updated_at)
    WHERE session_ref IS NOT NULL;
CREATE INDEX threads_follows ON {s}.threads(follows) WHERE follows IS NOT NULL;
CREATE TABLE {s}.session_heads (
    owner text NOT NULL,
    digest text NOT NULL,
    thread_id text NOT NULL REFERENCES {s}.threads(id) ON DELETE CASCADE,
    seq integer NOT NULL,
    PRIMARY KEY (owner, digest, thread_id)
);
CREATE INDEX session_heads_thread ON {s}.session_heads(thread_id);
CREATE TABLE {s}.session_owners (owner text PRIMARY KEY);
CREATE INDEX call_costs_request ON {s}.call_costs(principal, session_id, request_id);
"""

# A head counts for a request unless both name their client's session and the names
# differ: a new Claude Code session opening with the words of an earlier one is a
# session of its own, not a retry or a branch of the earlier one.
_HEADS = (
    "SELECT h.digest, h.thread_id, h.seq FROM {p}session_heads h"
    " JOIN {p}threads t ON t.id = h.thread_id WHERE h.owner = ?"
)
_SAME_REF = " AND (t.session_ref IS NULL OR t.session_ref = ?)"
# Where one digest heads several threads (two sessions opened alike), the thread of
# the request's own session first, then the one most recently active.
_BEST_FIRST = " ORDER BY CASE WHEN t.session_ref IS NULL THEN 1 ELSE 0 END, t.updated_at DESC, t.id"
_OWNER_LOCK = (
    "INSERT INTO {p}session_owners (owner) VALUES (?)"
    " ON CONFLICT (owner) DO UPDATE SET owner = excluded.owner"
)
_TURN_AT = (
    "SELECT first_seq, last_seq FROM {p}request_turns WHERE thread_id = ?"
    " AND first_seq <= ? AND last_seq >= ? ORDER BY first_seq LIMIT 1"
)
_PUT_HEAD = (
    "INSERT INTO {p}session_heads (owner, digest, thread_id, seq) VALUES (?, ?, ?, ?)"
    " ON CONFLICT DO NOTHING"
)
_LATEST_OF_REF = (
    f"SELECT {THREAD_COLUMNS} FROM {{p}}threads WHERE owner = ? AND session_ref = ?"
    " AND deleted_at IS NULL ORDER BY updated_at DESC LIMIT 1"
)
# The boundaries looked up first, then next: a continuation starts with everything
# but the request's last few messages (the tool results or the user message it
# adds). Each digest asked costs an index probe (the heads query is the costliest
# statement of a turn), most requests add one to three messages, and a request
# that adds more, or starts a session, asks again.
_FIRST = 4
_RECENT = 16
_CHUNK = 400
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_WRAPPED = re.compile(r"\s*<([a-z][a-z_-]*)\b[^>]*>.*</\1>\s*", re.S)


def person_text(message: Mapping[str, Any]) -> str:
    """What a person wrote in a user message: its texts but the tagged blocks agents
    send along (Claude Code's ``<system-reminder>``, Codex's
    ``<environment_context>``), reminders inside a text taken out."""
    if message.get("role") != "user":
        return ""
    content = message.get("content")
    parts = [content] if isinstance(content, str) else [
        p.get("text") for p in content or () if isinstance(p, Mapping)
    ]  # fmt: skip
    texts = [" ".join(_REMINDER.sub(" ", part).split()) for part in parts
             if isinstance(part, str) and not _WRAPPED.fullmatch(part)]  # fmt: skip
    return "\n".join(t for t in texts if t)


def title_of(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The first words a person wrote (see :func:`person_text`)."""
    for message in messages:
        text = person_text(message)
        if text:
            return " ".join(text.split())[:80]
    return None


class SessionRows(TurnRows, SqlBase):
    """Agent sessions' heads, on the store's connections (a part of ``SqlStore``)."""

    async def keep_session_turn(self, turn: SessionTurn) -> SessionKept:
        kept = (await self.keep_session_turns([turn]))[0]
        if isinstance(kept, ExaiError):
            raise kept
        return kept

    async def keep_session_turns(
        self, turns: Sequence[SessionTurn]
    ) -> list[SessionKept | ExaiError]:
        """Keep ``turns`` in their order, in one write transaction: each sees what the
        ones before it wrote. A turn the store refuses as such (an
        :class:`~exai.errors.ExaiError`: a malformed message, a request key reused)
        is its error in the list, and the others are kept, one transaction each.
        Any other failure (the store is unreachable) is raised, nothing kept."""
        if not turns:
            return []

        async def body(tx: Executor) -> list[SessionKept | ExaiError]:
            if self.dialect.lock_row:
                # One principal's turns are kept one at a time, whichever daemon keeps
                # them: each then sees the heads the one before it wrote (a row lock
                # until commit, taken in one order). SQLite's one writer needs none.
                for owner in sorted({t.owner for t in turns}):
                    await tx.execute(self._q(_OWNER_LOCK), owner)
            return [await self._keep_in(tx, turn) for turn in turns]

        try:
            return await self._claiming(body)
        except ExaiError as exc:
            if len(turns) == 1:
                return [exc]
        return [kept for turn in turns for kept in await self.keep_session_turns([turn])]

    # The digests of the last requests this store kept (see BoundaryCache): made on
    # first use, since the store's parts have no constructor of their own.
    _boundary_cache: BoundaryCache | None = None

    def _digests(self, owner: str, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        if self._boundary_cache is None:
            self._boundary_cache = BoundaryCache()
        return self._boundary_cache.boundaries(owner, messages)

    async def _keep_in(self, tx: Executor, turn: SessionTurn) -> SessionKept:
        owner = turn.owner
        # Hashing the history is done here, where the backend runs its transactions
        # (SQLite: its own thread), and only for what the cache has not seen.
        digests = self._digests(owner, turn.messages)
        retry_key = input_digest(digests[-1])
        end = answer_digest(digests[-1], turn.answer)
        found = await self._longest_head(tx, turn, digests, retry_key)
        if found is not None and found[0] == len(digests):  # the same input: a retry
            _, thread_id, seq = found
            await tx.execute(self._q(_PUT_HEAD), owner, end, thread_id, seq)
            await self._claim_retry(tx, turn, thread_id, int(seq))
            return SessionKept(thread_id, "retried", seq, seq)
        done: tuple[SessionKept, dict[int, int]] | None = None
        if found is not None:
            done = await self._extend(tx, turn, *found)
        if done is None:
            done = await self._start(tx, turn)
        kept, seq_of = done
        heads = [(retry_key, kept.last_seq), (end, kept.last_seq),
                 *_earlier_heads(turn.messages, digests, seq_of)]  # fmt: skip
        await tx.executemany(self._q(_PUT_HEAD),
                             [(owner, d, kept.thread_id, seq) for d, seq in heads])  # fmt: skip
        return kept

    async def _claim_retry(self, tx: Executor, turn: SessionTurn, thread_id: str, seq: int) -> None:
        """Give a retried request's key the turn that holds its answer, so that what its
        call cost is that turn's (and the thread's): a retry costs again."""
        row = await tx.fetchrow(self._q(_TURN_AT), thread_id, seq, seq)
        if row is not None:
            await tx.execute(self._q(_CLAIM_REQUEST), turn.owner, turn.session_id, turn.request_id,
                             "session", thread_id, row[0], row[1])  # fmt: skip

    async def _live_thread(self, tx: Executor, thread_id: str, owner: str) -> Thread | None:
        try:
            thread, _ = await self._owned(tx, thread_id, owner)
        except ConversationNotFoundError:  # deleted or expired: the session starts afresh
            return None
        return thread

    async def _heads(
        self, tx: Executor, turn: SessionTurn, digests: Sequence[str]
    ) -> Sequence[Sequence[Any]]:
        """The stored heads among ``digests`` that count for ``turn``: (digest, thread
        id, seq) rows, the best thread for each digest first."""
        sql = f"{_HEADS} AND h.digest IN ({', '.join('?' * len(digests))})"
        args: list[Any] = [turn.owner, *digests]
        if turn.ref:
            sql += _SAME_REF
            args.append(turn.ref)
        return await tx.fetch(self._q(sql + _BEST_FIRST), *args)

    async def _longest_head(
        self, tx: Executor, turn: SessionTurn, digests: list[str], retry_key: str
    ) -> tuple[int, str, int] | None:
        """Where the request goes on: (boundary index, thread id, seq) of the last
        message boundary whose digest is a stored head, newest boundaries asked first,
        or ``len(digests)`` for a stored turn's whole input (``retry_key``: a retry)
        whose thread is still there."""
        at = {d: i for i, d in enumerate(digests[1:-1], start=1)}  # a later boundary wins
        at[retry_key] = len(digests)
        ordered = sorted(at, key=at.__getitem__, reverse=True)
        chunks = [ordered[: _FIRST + 1], ordered[_FIRST + 1 : _RECENT + 1]] + [
            ordered[i : i + _CHUNK] for i in range(_RECENT + 1, len(ordered), _CHUNK)
        ]
        for chunk in filter(None, chunks):
            rows = await self._heads(tx, turn, chunk)
            for digest, thread_id, seq in sorted(rows, key=lambda r: -at[r[0]]):
                if at[digest] < len(digests):
                    return at[digest], thread_id, int(seq)
                if await self._live_thread(tx, thread_id, turn.owner):
                    return at[digest], thread_id, int(seq)
        return None

    async def _extend(
        self, tx: Executor, turn: SessionTurn, boundary: int, thread_id: str, seq: int
    ) -> tuple[SessionKept, dict[int, int]] | None:
        """Continue the thread at its end, or branch it at ``seq``; None when the thread
        is gone or full (the request then starts a thread of its own)."""
        try:
            thread, chars = await self._owned(tx, thread_id, turn.owner, lock=True)
        except ConversationNotFoundError:
            return None
        if thread.turns >= self.limits.max_turns:
            return None
        kept_at = [i for i in range(boundary, len(turn.messages))
                   if turn.messages[i].get("role") != "system"]  # fmt: skip
        new = [turn.messages[i] for i in kept_at]
        kept: Kept = "continued"
        if seq != thread.last_seq:
            thread, kept = await self._fork_in(tx, thread, seq, keep_origin=True), "branched"
            chars = await self._chars(tx, thread.id)
        stored = await self._append_in(tx, thread, chars, self._turn(turn, new))
        seq_of = {i: m.seq for i, m in zip(kept_at, stored, strict=False)}
        return SessionKept(thread.id, kept, stored[0].seq, stored[-1].seq,
                           asked=_asked(new)), seq_of  # fmt: skip

    async def _chars(self, tx: Executor, thread_id: str) -> int:
        row = await tx.fetchrow(self._q("SELECT total_chars FROM {p}threads WHERE id = ?"),
                                thread_id)  # fmt: skip
        return int(row[0]) if row else 0

    async def _start(self, tx: Executor, turn: SessionTurn) -> tuple[SessionKept, dict[int, int]]:
        follows = None
        if turn.ref:
            row = await tx.fetchrow(self._q(_LATEST_OF_REF), turn.owner, turn.ref)
            follows = None if row is None else decode_thread(row, self.limits.ttl_s).id
        now = self._clock()
        thread = Thread(
            id=str(uuid.uuid4()), owner=turn.owner, title=title_of(turn.messages),
            created_at=now, updated_at=now, expires_at=now + self.limits.ttl_s, face=turn.face,
            client=turn.client, session_ref=turn.ref, follows=follows,
        )  # fmt: skip
        await tx.execute(self._q(INSERT_THREAD), *thread_row(thread, 0))
        stored = await self._append_in(tx, thread, 0, self._turn(turn, list(turn.messages)))
        seq_of = {i: m.seq for i, m in enumerate(stored[: len(turn.messages)])}
        return SessionKept(thread.id, "started", stored[0].seq, stored[-1].seq, follows,
                           _asked(turn.messages)), seq_of  # fmt: skip

    @staticmethod
    def _turn(turn: SessionTurn, new: list[Mapping[str, Any]]) -> _Turn:
        return _Turn([*new, turn.answer], turn.request_id, turn.session_id,
                     "session", turn.model, turn.provider, turn.usage, None)  # fmt: skip


def _asked(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(filter(None, (person_text(m) for m in messages)))


def _earlier_heads(
    messages: Sequence[Mapping[str, Any]], digests: list[str], seq_of: dict[int, int]
) -> list[tuple[str, int]]:
    """The heads of the answers a turn stored among the request's own messages (a
    history exai had not kept, or an answer another daemon had not written yet): for
    each run of assistant messages, the digest after it and its input's retry key,
    both at the run's last message. Another daemon keeping that answer's own request
    afterwards then finds it kept (a retry), and writes it no second time."""
    heads: list[tuple[str, int]] = []
    start: int | None = None
    for i in sorted(seq_of):
        if messages[i].get("role") != "assistant":
            start = None
            continue
        start = i if start is None else start
        if i + 1 not in seq_of or messages[i + 1].get("role") != "assistant":
            heads += [(input_digest(digests[start]), seq_of[i]), (digests[i + 1], seq_of[i])]
    return heads
