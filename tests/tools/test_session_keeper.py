"""The session keeper's queue over a real SQLite store: a store that cannot be
written keeps the turns and gets them later, in order; a turn the store refuses is
counted and does not hold the others back; the bound lets the oldest go, counted."""

from __future__ import annotations

from typing import Any

from exai.errors import ValidationError_
from exai.store.base import ANY_OWNER, StoreLimits
from exai.store.sessions import SessionKept, SessionTurn
from exai.store.sqlite import SqliteStore
from exai.tools.session_keeper import SessionKeeper


class _Outage:
    """A TEST FIXTURE: the real store behind a switch that makes writes fail as an
    unreachable database does, and a turn the store refuses as malformed."""

    def __init__(self, store: SqliteStore, failures: int) -> None:
        self.store, self.failures, self.calls = store, failures, 0

    async def keep_session_turn(self, turn: SessionTurn) -> SessionKept:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionRefusedError("the database is down")
        if turn.request_id == "malformed":
            raise ValidationError_("message 0 is not an object")
        return await self.store.keep_session_turn(turn)


def _turn(n: int, request_id: str | None = None, **kw: Any) -> SessionTurn:
    history = []
    for i in range(n):
        history += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    asked = [*history, {"role": "user", "content": f"q{n}"}]
    answer = {"role": "assistant", "content": f"a{n}"}
    return SessionTurn(owner="alice", messages=asked, answer=answer, session_id="S",
                       request_id=request_id or f"r{n}", face="openai", **kw)  # fmt: skip


async def test_turns_wait_out_an_outage_and_are_kept_in_order(tmp_path) -> None:
    store = await SqliteStore.open(tmp_path / "c.sqlite3", StoreLimits())
    outage = _Outage(store, failures=3)
    keeper = SessionKeeper(outage)
    keeper.start()
    try:
        for n in range(3):
            keeper.keep(_turn(n))
        keeper.keep(_turn(0, "malformed"))
        await keeper.settled()
        assert keeper.stats() == {"kept": 3, "failed": 1, "dropped": 0, "queued": 0}
        (thread,) = await store.list_threads(ANY_OWNER)
        assert thread.turns == 3  # each continued the one before, though the first waited
        assert outage.calls == 3 + 3 + 1
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
