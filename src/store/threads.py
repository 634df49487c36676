"""Threads in the SQL conversation store: creating, listing, deleting, pruning,
forking and importing them (forks and imports lean on :mod:`exai.store.lineage`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from exai.errors import ValidationError_
from exai.sqldb.executor import Executor
from exai.store.base import ANY_OWNER, Owner, StoredMessage, Thread
from exai.store.lineage import ancestry_depth, check_depth, check_fork_point, restore_rows
from exai.store.rows import (
    MESSAGE_INSERT_COLUMNS,
    THREAD_COLUMNS,
    check_thread_id,
    decode_thread,
    loads,
    thread_row,
)
from exai.store.search import origin_filter
from exai.store.sql_base import INSERT_MESSAGE, INSERT_THREAD, UPSERT_FILE, SqlBase

__all__ = ["ThreadRows"]

_THREAD_SELECT = f"SELECT {THREAD_COLUMNS} FROM {{p}}threads"


class ThreadRows(SqlBase):
    """The threads table and what copies a thread whole (a fork, an import)."""

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
            await tx.execute(self._q(INSERT_THREAD), *thread_row(created, 0))
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
        agent: bool | None = None,
        face: str | None = None,
        client: str | None = None,
    ) -> list[Thread]:
        where, args = origin_filter("", agent=agent, face=face, client=client)
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

    async def related_threads(self, thread_id: str, owner: Owner) -> list[Thread]:
        """The live threads that came from this one: its forks (``parent_id``) and the
        threads that follow it (``follows``), oldest first."""
        tid = check_thread_id(thread_id)
        sql = _THREAD_SELECT + (" WHERE (parent_id = ? OR follows = ?) AND deleted_at IS NULL"
                                " AND updated_at > ?")  # fmt: skip
        args: list[Any] = [tid, tid, self._clock() - self.limits.ttl_s]
        if owner is not ANY_OWNER:
            sql += " AND owner = ?"
            args.append(owner)
        rows = await self._read(lambda db: db.fetch(self._q(sql + " ORDER BY created_at, id"),
                                                    *args))  # fmt: skip
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
        return await self._write(lambda tx: tx.execute(sql, cutoff))

    async def fork(self, thread_id: str, owner: Owner, at_seq: int | None = None) -> Thread:
        tid = check_thread_id(thread_id)

        async def body(tx: Executor) -> Thread:
            source, _ = await self._owned(tx, tid, owner, lock=True)
            return await self._fork_in(tx, source, at_seq)

        return await self._write(body)

    async def _fork_in(
        self, tx: Executor, source: Thread, at_seq: int | None, *, keep_origin: bool = False
    ) -> Thread:
        """Copy ``source`` up to ``at_seq`` into a new thread, inside ``tx``. A person's
        fork of an agent session is the person's (no face or client); the branch an
        agent itself made (``keep_origin``) stays the agent's session, and may start
        between a tool call and its results, which its first turn brings."""
        tid, now, new_id = source.id, self._clock(), str(uuid.uuid4())
        at = source.last_seq if at_seq is None else at_seq
        if not 0 <= at <= source.last_seq:
            raise ValidationError_(f"--at must be within 0..{source.last_seq}")
        depth = await ancestry_depth(tx, self.dialect, source.id, new_id,
                                     self.limits.fork_max_depth)  # fmt: skip
        check_depth(depth, source.id, self.limits, self._log)
        if not keep_origin:  # an agent's branch brings the round's results in its turn
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
        if keep_origin:
            fork = replace(fork, face=source.face, client=source.client,
                           session_ref=source.session_ref)  # fmt: skip
        await tx.execute(self._q(INSERT_THREAD), *thread_row(fork, int(stats[1])))
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
            await tx.executemany(self._q(UPSERT_FILE),
                                 [(new_id, p, s) for p, s in latest.items()])  # fmt: skip
        return fork

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
            await tx.execute(self._q(INSERT_THREAD), *thread_row(restored, restoring.chars))
            if restoring.rows:
                await tx.executemany(self._q(INSERT_MESSAGE), restoring.rows)
            if restoring.files:
                await tx.executemany(self._q(UPSERT_FILE),
                                     [(tid, p, s) for p, s in restoring.files.items()])  # fmt: skip
            return restored

        return await self._write(body)
