"""Keeping agent sessions' turns after their answers, off every request's path.

``completion`` hands each answered model-face request that is kept as an agent
session (see :mod:`exai.store.sessions`) to :meth:`SessionKeeper.keep`, which
queues it and returns at once: the agent has its answer before exai looks up the
thread it continues or writes the turn. One worker per daemon writes the queue in
order, so a request is always kept after the one it continues (an agent sends
the next request only once it has the answer, and that answer was queued
first).

The worker writes in the lulls between answers: once a turn is queued it waits
until none has been queued for ``quiet_s`` (200 ms), then keeps what waited, up to
``_BATCH`` turns a transaction. Each hop to the store (in the daemon: the session
writer process, :mod:`exai.store.session_writer`) and each transaction costs more
than the turn's own statements, and its CPU, on a busy machine, is CPU the
requests it meets do not get: an agent answered at once sends its next request
within milliseconds, so its turns are kept after its burst, not between its
requests. Under traffic with no such lull the turns are written all the same, at
the latest ``max_wait_s`` (1 s) after the oldest was queued. A store that cannot
be written keeps the turns queued and tried again, one at a time, with backoff,
like the cost rows (:class:`~exai.accounting.ledger.Ledger`); a turn the store
refuses as such (an :class:`~exai.errors.ExaiError`) is logged and counted as
failed.

With memory extraction on (the keeper is handed the memory service), what a
person asked in each kept turn is queued for extraction with its thread.

The queue is bounded (``max_queued``): past it, the oldest waiting turn is let
go, logged and counted (``stats()["dropped"]``, in ``exai status``), never the
daemon's memory. Closing writes what is queued, for at most ``drain_s``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import time
from typing import Any

from exai.errors import ExaiError
from exai.logs import get_logger
from exai.store.sessions import SessionKept, SessionTurn

__all__ = ["SessionKeeper"]

log = get_logger("exai.sessions")
# Tries of one turn while the store fails (about a minute and a half with the
# backoff) before it is given up, logged and counted, so that no one turn the store
# keeps refusing holds every later one back.
_ATTEMPTS = 24
_BATCH = 32


class SessionKeeper:
    def __init__(
        self, store: Any, *, memory: Any = None, max_queued: int = 10_000, drain_s: float = 10.0,
        quiet_s: float = 0.2, max_wait_s: float = 1.0, closes_store: bool = False,
    ) -> None:  # fmt: skip
        # The store, or what keeps turns like it (exai.store.session_writer), which the
        # keeper closes when it is its own (closes_store).
        self._store = store
        self._closes_store = closes_store
        self._quiet_s, self._max_wait_s = quiet_s, max_wait_s
        self._last_queued = 0.0  # time.monotonic() when the last turn was queued
        self._queue: collections.deque[SessionTurn] = collections.deque()
        self._max = max_queued
        self._drain_s = drain_s
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._counts = {"kept": 0, "failed": 0, "dropped": 0}
        # exai.memory.MemoryService, when memory extraction is on: it learns from the turns.
        self._memory = memory

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="exai-sessions")

    def keep(self, turn: SessionTurn) -> None:
        """Queue ``turn``; never waits."""
        if len(self._queue) >= self._max:
            dropped = self._queue.popleft()
            self._counts["dropped"] += 1
            log.error("session_turn_dropped", principal=dropped.owner,
                      request_id=dropped.request_id, queued=len(self._queue))  # fmt: skip
        self._queue.append(turn)
        self._last_queued = time.monotonic()
        self._idle.clear()
        self._wake.set()

    def stats(self) -> dict[str, int]:
        return {**self._counts, "queued": len(self._queue)}

    async def settled(self) -> None:
        """Return once every turn queued so far is written (or given up)."""
        await self._idle.wait()

    async def _run(self) -> None:
        delay, attempts, batch = 0.05, 0, _BATCH
        while True:
            await self._wake.wait()
            await self._lull()
            self._wake.clear()
            while self._queue:
                turns = list(itertools.islice(self._queue, batch))
                try:
                    results = await self._store.keep_session_turns(turns)
                except Exception as exc:  # the store is unreachable: keep them, try again
                    attempts, batch = attempts + 1, 1
                    if attempts < _ATTEMPTS:
                        log.warning("session_turn_not_written", error=repr(exc),
                                    queued=len(self._queue))  # fmt: skip
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 5.0)
                        continue
                    # Given up on the first turn; the next one gets tries of its own.
                    self._fail(turns[0], exc)
                    self._let_go(turns[:1])
                    delay, attempts = 0.05, 0
                    continue
                delay, attempts, batch = 0.05, 0, _BATCH
                for turn, kept in zip(turns, results, strict=True):
                    if isinstance(kept, ExaiError):  # this turn cannot be kept (malformed...)
                        self._fail(turn, kept)
                    else:
                        self._counts["kept"] += 1
                        self._learn(turn, kept)
                self._let_go(turns)
            self._idle.set()

    async def _lull(self) -> None:
        """Return once no turn has been queued for ``quiet_s`` (the first was queued
        as its call returned, before the face wrote the answer, which goes out
        first), or ``max_wait_s`` after the first."""
        deadline = time.monotonic() + self._max_wait_s
        while True:  # each answer queued meanwhile moves the end of the lull on
            wait = min(self._last_queued + self._quiet_s, deadline) - time.monotonic()
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    def _let_go(self, turns: list[SessionTurn]) -> None:
        """Take ``turns`` off the queue's head, unless the bound already let them go."""
        for turn in turns:
            if self._queue and self._queue[0] is turn:
                self._queue.popleft()

    def _learn(self, turn: SessionTurn, kept: SessionKept) -> None:
        """With memory extraction on, what a person asked in the turn is queued for
        it, with the thread, like a ``chat`` turn's prompt."""
        if self._memory is None:
            return
        for text in kept.asked:
            self._memory.queue_extraction(turn.owner, text, kept.thread_id, None,
                                         allowed=turn.allowed_models)  # fmt: skip

    def _fail(self, turn: SessionTurn, exc: BaseException) -> None:
        self._counts["failed"] += 1
        log.error("session_turn_failed", principal=turn.owner, request_id=turn.request_id,
                  error=repr(exc))  # fmt: skip

    async def aclose(self) -> None:
        if self._task is None:
            return
        try:
            await self._drain()
        finally:
            if self._closes_store:
                await self._store.aclose()

    async def _drain(self) -> None:
        assert self._task is not None
        if self._queue:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.settled(), self._drain_s)
        if self._queue:
            log.error("session_turns_lost", queued=len(self._queue))
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
