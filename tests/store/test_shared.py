"""Several daemons on one database: two stores opened on the same data at once.

On Postgres each store has its own connection pool, as two daemons would; on
SQLite each has its own connections, as two processes would.
"""

from __future__ import annotations

import asyncio

from tests.store.conftest import LATEST_SCHEMA, StoreFactory


async def test_two_daemons_start_at_once_on_an_empty_database(
    store_factory: StoreFactory,
) -> None:
    first, second = await asyncio.gather(store_factory(), store_factory())
    assert await first.schema_version() == await second.schema_version() == LATEST_SCHEMA  # type: ignore[attr-defined]


async def test_two_daemons_appending_to_one_thread_keep_one_order(
    store_factory: StoreFactory,
) -> None:
    one, two = await store_factory(), await store_factory()
    thread = await one.create_thread("alice")

    async def turn(store, n: int) -> None:  # type: ignore[no-untyped-def]
        await store.append(thread.id, "alice", [{"role": "user", "content": f"q{n}"},
                                                {"role": "assistant", "content": f"a{n}"}],
                           request_id=f"r{n}")  # fmt: skip

    await asyncio.gather(*(turn(one if n % 2 else two, n) for n in range(30)),
                         *(turn(two if n % 2 else one, n) for n in range(30)))  # fmt: skip
    for store in (one, two):
        messages = await store.messages(thread.id, "alice")
        assert [m.seq for m in messages] == list(range(1, 61))
        assert sorted(m.request_id for m in messages[::2]) == sorted(f"r{n}" for n in range(30))
        for first, second in zip(messages[::2], messages[1::2], strict=True):
            assert (first.turn, first.content[1:]) == (second.turn, second.content[1:])


async def test_turn_n_written_by_one_daemon_is_read_by_the_other(
    store_factory: StoreFactory,
) -> None:
    one, two = await store_factory(), await store_factory()
    thread = await one.create_thread("alice")
    await one.append(thread.id, "alice", [{"role": "user", "content": "q1"},
                                          {"role": "assistant", "content": "a1"}],
                     request_id="r1")  # fmt: skip
    seen = await two.messages(thread.id, "alice")
    assert [m.content for m in seen] == ["q1", "a1"]
    await two.append(thread.id, "alice", [{"role": "user", "content": "q2"}], request_id="r2")
    assert [m.seq for m in await one.messages(thread.id, "alice")] == [1, 2, 3]
