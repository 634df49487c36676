"""The session keeper's queue over a real SQLite store: turns queued together are
kept in one transaction, in the lull after a burst of answers, or a second after
the first under traffic with no lull; a store that cannot be written keeps the
turns and gets them later, in order; a turn the store refuses is counted and does not hold the
others back; the bound lets the oldest go, counted."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from exai.errors import ValidationError_
from exai.store.base import ANY_OWNER, StoreLimits
from exai.store.sessions import SessionTurn
from exai.store.sqlite import SqliteStore
from exai.tools.session_keeper import SessionKeeper


class _Outage:
    """A TEST FIXTURE: the real store behind a switch that makes writes fail as an
    unreachable database does; it counts the keeper's calls."""

    def __init__(self, store: SqliteStore, failures: int) -> None:
        self.store, self.failures, self.calls = store, failures, 0
        self.written_at: list[float] = []  # time.monotonic() of each call

    async def keep_session_turns(self, turns: list[SessionTurn]) -> list[Any]:
        self.calls += 1
        self.written_at.append(time.monotonic())
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionRefusedError("the database is down")
        return await self.store.keep_session_turns(turns)


def _turn(n: int, request_id: str | None = None, **kw: Any) -> SessionTurn:
    history = []
    for i in range(n):
        history += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    asked = [*history, {"role": "user", "content": f"q{n}"}]
    answer = {"role": "assistant", "content": f"a{n}"}
    return SessionTurn(owner="alice", messages=asked, answer=answer, session_id="S",
                       request_id=request_id or f"r{n}", face="openai", **kw)  # fmt: skip


def _malformed() -> SessionTurn:
    """A turn whose message the store refuses (a role no conversation has)."""
    return SessionTurn(owner="alice", messages=[{"role": "narrator", "content": "x"}],
                       answer={"role": "assistant", "content": "y"}, session_id="S",
                       request_id="malformed", face="openai")  # fmt: skip


@contextlib.asynccontextmanager
async def _keeping(
    tmp_path: Path, **kw: Any
) -> AsyncIterator[tuple[SqliteStore, _Outage, SessionKeeper]]:
    """A keeper started over a real store that counts its writes (none failing)."""
    store = await SqliteStore.open(tmp_path / "c.sqlite3", StoreLimits())
    counted = _Outage(store, failures=0)
    keeper = SessionKeeper(counted, **kw)
    keeper.start()
    try:
        yield store, counted, keeper
    finally:
        await keeper.aclose()
        await store.aclose()


async def test_turns_queued_together_are_kept_in_one_transaction_in_order(tmp_path) -> None:
    async with _keeping(tmp_path) as (store, counted, keeper):
        for n in range(10):  # one agent answered ten times at once
            keeper.keep(_turn(n))
        await keeper.settled()
        assert counted.calls == 1
        (thread,) = await store.list_threads(ANY_OWNER)
        assert thread.turns == 10  # each continued the one before, in the same transaction


async def test_a_burst_of_answers_is_kept_in_the_lull_after_it(tmp_path) -> None:
    async with _keeping(tmp_path, quiet_s=1.0, max_wait_s=10) as (store, counted, keeper):
        for n in range(8):  # an agent answered every 20 ms: no 1 s lull within it
            keeper.keep(_turn(n))
            await asyncio.sleep(0.02)
        last = time.monotonic()
        assert counted.calls == 0  # nothing written while the answers kept coming
        await keeper.settled()
        assert counted.calls == 1 and counted.written_at[0] >= last
        (thread,) = await store.list_threads(ANY_OWNER)
        assert thread.turns == 8


async def test_traffic_with_no_lull_is_kept_within_the_longest_wait(tmp_path) -> None:
    async with _keeping(tmp_path, quiet_s=1.0, max_wait_s=0.2) as (store, counted, keeper):
        for n in range(30):  # 0.6 s or more of answers 20 ms apart
            keeper.keep(_turn(n))
            last = time.monotonic()
            await asyncio.sleep(0.02)
        # Written while they kept coming (the first batch before the last answer), not
        # after: however slow the machine, for the longest wait is counted from the first.
        assert counted.calls >= 2 and counted.written_at[0] < last
        await keeper.settled()
        (thread,) = await store.list_threads(ANY_OWNER)
        assert thread.turns == 30  # in order, in one thread, across the writes


async def test_turns_wait_out_an_outage_and_are_kept_in_order(tmp_path) -> None:
    store = await SqliteStore.open(tmp_path / "c.sqlite3", StoreLimits())
    outage = _Outage(store, failures=3)
    keeper = SessionKeeper(outage)
    keeper.start()
    try:
        for n in range(2):
            keeper.keep(_turn(n))
        keeper.keep(_malformed())
        keeper.keep(_turn(2))
        await keeper.settled()
        assert keeper.stats() == {"kept": 3, "failed": 1, "dropped": 0, "queued": 0}
        assert outage.failures == 0  # every write the outage refused was tried again
        (thread,) = await store.list_threads(ANY_OWNER)
        assert thread.turns == 3  # each continued the one before, though the first waited
        with pytest.raises(ValidationError_):  # what the keeper counted as failed
            await store.keep_session_turn(_malformed())
    finally:
        await keeper.aclose()
        await store.aclose()


async def test_past_its_bound_the_oldest_turn_is_let_go_and_counted(tmp_path) -> None:
    store = await SqliteStore.open(tmp_path / "c.sqlite3", StoreLimits())
    keeper = SessionKeeper(store, max_queued=2)  # not started: the queue only fills
    for n in range(3):
        keeper.keep(_turn(n))
    assert keeper.stats() == {"kept": 0, "failed": 0, "dropped": 1, "queued": 2}
    keeper.start()
    await keeper.settled()
    await keeper.aclose()
    threads = await store.list_threads(ANY_OWNER)
    assert keeper.stats()["kept"] == 2 and len(threads) == 1 and threads[0].turns == 2
    await store.aclose()
