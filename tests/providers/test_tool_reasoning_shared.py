"""The tool-round reasoning cache per principal and in the store: one principal's
volume never evicts another's rounds (in memory or in the store), a round memory
lacks costs one read of the store, none when memory holds it, and a store that
does not answer leaves the round unknown rather than failing the request.

Pure tests of :class:`ToolReasoning` with an injected clock and a store stand-in,
then the store's pruning on SQLite and Postgres, and the background writer over a
restart. The daemons behind HAProxy are in tests/cluster/test_any_daemon.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from exai.cluster.reasoning import SharedReasoning
from exai.emulators.postgres import TempPostgres
from exai.providers import tool_reasoning
from exai.providers.tool_reasoning import ENTRY_OVERHEAD, KeptReasoning, ToolReasoning
from exai.store.postgres import PostgresStore
from exai.store.sql import SqlStore
from exai.store.sqlite import SqliteStore

ENTRY = ENTRY_OVERHEAD + 100  # the bytes of an entry with 100 bytes of reasoning
QUESTION = {"role": "user", "content": "what does notes.txt say?"}


def turn(reasoning: str, call_id: str = "c0") -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"role": "assistant", "content": "", "reasoning_content": reasoning,
            "tool_calls": [call]}  # fmt: skip


def returned(call_id: str = "c0") -> dict[str, Any]:
    """The round as an OpenAI client sends it back: no reasoning."""
    message = turn("", call_id)
    del message["reasoning_content"]
    return message


def known(cache: ToolReasoning, owner: str, call_id: str) -> bool:
    return cache.restore(owner, [returned(call_id)])[1] == []


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class StandIn:
    """The store's reasoning rows as a dict, counting reads; ``late`` keys appear only
    from the second read on (a row another daemon's writer has not written yet)."""

    def __init__(self) -> None:
        self.rows: dict[bytes, KeptReasoning] = {}
        self.reads: list[list[bytes]] = []
        self.late: set[bytes] = set()
        self.fail = False

    def write(self, cache: ToolReasoning) -> None:
        for entry in cache.take_pending():
            self.rows[entry.key] = entry

    async def load(self, owner: str, keys: Sequence[bytes]) -> list[KeptReasoning]:
        self.reads.append(list(keys))
        if self.fail:
            raise ConnectionError("the database went away")
        hidden = self.late if len(self.reads) == 1 else set()
        return [self.rows[k] for k in keys if k in self.rows and k not in hidden]


# --- one principal's volume ---------------------------------------------------------


def test_one_principal_filling_its_budget_does_not_evict_anothers_rounds() -> None:
    clock = Clock()
    cache = ToolReasoning(max_bytes=10 * ENTRY, ttl_s=60, clock=clock, principal_bytes=3 * ENTRY)
    cache.remember("bob", [], turn("b" * 100, "b0"))
    for n in range(20):
        cache.remember("alice", [], turn("a" * 100, f"a{n}"))

    assert known(cache, "bob", "b0")
    assert cache.held_by("alice") == 3 * ENTRY and cache.held_by("bob") == ENTRY
    assert [known(cache, "alice", f"a{n}") for n in (0, 16, 17, 18, 19)] == [
        False, False, True, True, True
    ]  # fmt: skip
    assert cache.stats.evicted == 17


def test_all_principals_together_give_up_the_largest_share_first() -> None:
    cache = ToolReasoning(max_bytes=4 * ENTRY, ttl_s=60, clock=Clock(), principal_bytes=3 * ENTRY)
    for n in range(3):
        cache.remember("alice", [], turn("a" * 100, f"a{n}"))
    cache.remember("bob", [], turn("b" * 100, "b0"))
    cache.remember("carol", [], turn("c" * 100, "c0"))  # five entries for room for four

    assert cache.bytes_held == 4 * ENTRY and len(cache) == 4
    assert known(cache, "bob", "b0") and known(cache, "carol", "c0")
    assert not known(cache, "alice", "a0") and known(cache, "alice", "a2")


def test_a_principals_rounds_expire_and_leave_its_share() -> None:
    clock = Clock()
    cache = ToolReasoning(max_bytes=10 * ENTRY, ttl_s=60, clock=clock, principal_bytes=3 * ENTRY)
    cache.remember("alice", [], turn("a" * 100))
    clock.now += 61
    assert not known(cache, "alice", "c0")
    assert cache.held_by("alice") == 0 and cache.bytes_held == 0


# --- reading what memory lacks ----------------------------------------------------------


def shared_pair(stand_in: StandIn) -> tuple[ToolReasoning, ToolReasoning]:
    """Two daemons' caches over one store."""
    caches = (ToolReasoning(10 * ENTRY, 60), ToolReasoning(10 * ENTRY, 60))
    for cache in caches:
        cache.share(stand_in.load)
    return caches


async def test_a_round_made_elsewhere_is_read_once_then_served_from_memory() -> None:
    stand_in = StandIn()
    here, there = shared_pair(stand_in)
    here.remember("alice", [QUESTION], turn("I should read the file"))
    stand_in.write(here)
    history = [QUESTION, returned(), {"role": "tool", "tool_call_id": "c0", "content": "x"}]

    out = await there.recall("alice", history)
    assert out[1]["reasoning_content"] == "I should read the file" and out[2] == history[2]
    assert "reasoning_content" not in history[1]  # the input is left alone
    assert there.restore("alice", history)[1] == [] and len(stand_in.reads) == 1

    await there.recall("alice", [*history, {"role": "user", "content": "and then?"}])
    out = await here.recall("alice", history)  # the daemon that made it holds it
    assert out[1]["reasoning_content"] == "I should read the file"
    assert len(stand_in.reads) == 1


async def test_another_principal_never_reads_the_round(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_reasoning, "RECHECK_S", 0.0)
    stand_in = StandIn()
    here, there = shared_pair(stand_in)
    here.remember("alice", [QUESTION], turn("alice's reasoning"))
    stand_in.write(here)

    await there.recall("bob", [QUESTION, returned()])
    assert there.restore("bob", [QUESTION, returned()])[1] == [1]


async def test_the_newest_round_not_written_yet_is_asked_for_once_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tool_reasoning, "RECHECK_S", 0.01)
    stand_in = StandIn()
    here, there = shared_pair(stand_in)
    here.remember("alice", [QUESTION], turn("why"))
    stand_in.write(here)
    stand_in.late = set(stand_in.rows)

    await there.recall("alice", [QUESTION, returned()])
    assert there.restore("alice", [QUESTION, returned()])[1] == []
    assert len(stand_in.reads) == 2


async def test_a_store_that_fails_leaves_the_round_unknown() -> None:
    stand_in = StandIn()
    stand_in.fail = True
    _, there = shared_pair(stand_in)
    await there.recall("alice", [QUESTION, returned()])
    assert there.restore("alice", [QUESTION, returned()])[1] == [1]
    assert there.stats.load_failures == 1


def test_rounds_wait_for_the_store_bounded_like_memory() -> None:
    cache = ToolReasoning(max_bytes=3 * ENTRY, ttl_s=60)
    cache.share(StandIn().load)
    for n in range(5):
        cache.remember("alice", [], turn(f"{n}" * 100, f"a{n}"))
    pending = cache.take_pending()
    assert [p.reasoning[0] for p in pending] == ["2", "3", "4"]  # the oldest were dropped
    assert cache.stats.dropped == 2
    cache.requeue(pending)
    assert cache.take_pending() == pending


# --- the store -------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_server: TempPostgres
) -> AsyncIterator[SqlStore]:
    opened: SqlStore
    if request.param == "sqlite":
        opened = await SqliteStore.open(tmp_path / "store.db")
    else:
        url = postgres_server.create_database(f"reasoning_{uuid.uuid4().hex[:8]}")
        opened = await PostgresStore.open(url, min_size=1, max_size=2)
    yield opened
    await opened.aclose()


def row(owner: str, n: int, *, at: float, expires: float = 10_000.0) -> KeptReasoning:
    return KeptReasoning(f"{owner}-{n}".encode().ljust(32, b"\0"), owner, f"{owner} {n}", 100,
                        at, expires)  # fmt: skip


async def test_the_store_keeps_each_principals_newest_rows_within_its_budget(
    store: SqlStore,
) -> None:
    await store.put_tool_reasoning([
        *(row("alice", n, at=float(n)) for n in range(5)),
        row("bob", 0, at=0.0),  # older than all of alice's
        row("carol", 0, at=0.0, expires=50.0),
    ])  # fmt: skip

    gone = await store.prune_tool_reasoning(per_owner_bytes=300, now=100.0)

    assert gone == 3
    kept = {r.reasoning for o in ("alice", "bob", "carol") for r in await store.tool_reasoning(
        o, [row(o, n, at=0).key for n in range(5)], now=100.0)}  # fmt: skip
    assert kept == {"alice 2", "alice 3", "alice 4", "bob 0"}


async def test_the_store_gives_a_principal_only_its_own_live_rows(store: SqlStore) -> None:
    await store.put_tool_reasoning([row("alice", 0, at=1.0), row("alice", 1, at=1.0, expires=5.0)])
    keys = [row("alice", n, at=0).key for n in range(2)]
    assert [r.reasoning for r in await store.tool_reasoning("alice", keys, now=10.0)] == ["alice 0"]
    assert await store.tool_reasoning("bob", keys, now=10.0) == []
    again = row("alice", 0, at=2.0)._replace(owner="bob", reasoning="bob's")
    await store.put_tool_reasoning([again])  # the same key under another owner changes nothing
    (found,) = await store.tool_reasoning("alice", keys, now=10.0)
    assert found.reasoning == "alice 0" and found.key == keys[0]


async def test_sqlite_keeps_the_rounds_over_a_restart(tmp_path: Path) -> None:
    history = [QUESTION, returned()]
    store = await SqliteStore.open(tmp_path / "store.db")
    before = ToolReasoning(10 * ENTRY, 60)
    writer = SharedReasoning(before, store)
    writer.start()
    before.remember("alice", [QUESTION], turn("kept over a restart"))
    await writer.aclose()  # a graceful stop writes what is queued
    await store.aclose()

    store = await SqliteStore.open(tmp_path / "store.db")
    try:
        after = ToolReasoning(10 * ENTRY, 60)
        SharedReasoning(after, store)
        out = await after.recall("alice", history)
    finally:
        await store.aclose()
    assert out[1]["reasoning_content"] == "kept over a restart"
