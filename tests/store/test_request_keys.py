"""A turn is found again by its request's key, (owner, session, request_id), and the
fingerprint of the call stored with it; run against SQLite and a real Postgres."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

import exai.store.postgres
import exai.store.sqlite
from exai.errors import ConversationNotFoundError, RequestIdReusedError
from exai.sqldb.executor import Executor
from exai.store.base import ConversationStore, StoredMessage, Thread
from exai.store.lineage import restore_rows
from exai.store.sql_base import INSERT_MESSAGE
from tests.store.conftest import LATEST_SCHEMA, StoreFactory

TURN = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]


def turn(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]


async def test_the_same_request_id_in_another_session_is_another_turn(
    store: ConversationStore,
) -> None:
    thread = await store.create_thread("alice")
    await store.append(thread.id, "alice", turn(1), request_id="1", session_id="A",
                       fingerprint="f1")  # fmt: skip
    second = await store.append(thread.id, "alice", turn(2), request_id="1", session_id="B",
                                fingerprint="f2")  # fmt: skip
    assert [m.content for m in second] == ["q2", "a2"]
    messages = await store.messages(thread.id, "alice")
    assert [m.content for m in messages] == ["q1", "a1", "q2", "a2"]
    assert [m.request_id for m in messages] == ["1", "1", "1", "1"]


async def test_a_key_sent_again_with_another_fingerprint_or_thread_is_refused(
    store: ConversationStore,
) -> None:
    thread = await store.create_thread("alice")
    other = await store.create_thread("alice")
    first = await store.append(thread.id, "alice", turn(1), request_id="r1", session_id="S",
                               fingerprint="f1")  # fmt: skip
    again = await store.append(thread.id, "alice", turn(9), request_id="r1", session_id="S",
                               fingerprint="f1")  # fmt: skip
    assert again == first
    for tid, fingerprint in ((thread.id, "f2"), (other.id, "f1")):
        with pytest.raises(RequestIdReusedError) as info:
            await store.append(tid, "alice", turn(2), request_id="r1", session_id="S",
                               fingerprint=fingerprint)  # fmt: skip
        assert info.value.details == {"request_id": "r1"}
    with pytest.raises(RequestIdReusedError):
        await store.start_thread("alice", turn(3), request_id="r1", session_id="S",
                                 fingerprint="f3")  # fmt: skip
    assert [m.content for m in await store.messages(thread.id, "alice")] == ["q1", "a1"]
    assert await store.messages(other.id, "alice") == []
    assert len(await store.list_threads("alice")) == 2


async def test_a_started_thread_is_found_again_by_its_key(store: ConversationStore) -> None:
    key = {"request_id": "first", "session_id": "S", "fingerprint": "f"}
    assert await store.find_turn("alice", **key) is None
    thread, stored = await store.start_thread("alice", TURN, title="hi", **key)
    again, restored = await store.start_thread("alice", turn(2), title="other", **key)
    assert again == thread and restored == stored
    found = await store.find_turn("alice", **key)
    assert found == (thread, stored)
    with pytest.raises(RequestIdReusedError):
        await store.find_turn("alice", "first", session_id="S", fingerprint="g")
    assert await store.find_turn("bob", **key) is None  # the owner is part of the key
    assert await store.find_turn("alice", "first", session_id="T", fingerprint="f") is None
    assert [t.id for t in await store.list_threads("alice")] == [thread.id]
    assert (await store.get_thread(thread.id, "alice")).turns == 1


async def test_a_thread_started_twice_at_once_is_started_once(store: ConversationStore) -> None:
    key = {"request_id": "race", "session_id": "S", "fingerprint": "f"}
    started = await asyncio.gather(*(store.start_thread("alice", turn(n), **key)
                                     for n in range(10)))  # fmt: skip
    assert len({thread.id for thread, _ in started}) == 1
    assert all(stored == started[0][1] for _, stored in started)
    assert len(await store.list_threads("alice")) == 1


async def test_two_daemons_starting_one_thread_at_once_start_it_once(
    store_factory: StoreFactory,
) -> None:
    one, two = await store_factory(), await store_factory()
    key = {"request_id": "race", "session_id": "S", "fingerprint": "f"}
    started = await asyncio.gather(*(
        (one if n % 2 else two).start_thread("alice", turn(n), **key) for n in range(20)
    ))  # fmt: skip
    assert len({thread.id for thread, _ in started}) == 1
    assert len(await one.list_threads("alice")) == 1


async def test_a_retry_into_a_deleted_thread_is_not_found(store: ConversationStore) -> None:
    key = {"request_id": "r", "session_id": "S", "fingerprint": "f"}
    thread, _ = await store.start_thread("alice", TURN, **key)
    await store.delete(thread.id, "alice")
    with pytest.raises(ConversationNotFoundError):
        await store.find_turn("alice", **key)
    with pytest.raises(ConversationNotFoundError):
        await store.start_thread("alice", TURN, **key)
    await store.prune()  # the key goes with its thread
    assert await store.find_turn("alice", **key) is None


async def test_a_store_of_the_previous_schema_is_migrated_and_keeps_its_turns(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (exai.store.sqlite, exai.store.postgres):
        monkeypatch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:1])
    old = await store_factory()
    assert await old.schema_version() == 1  # type: ignore[attr-defined]
    now = time.time()
    thread = Thread(id=str(uuid.uuid4()), owner="alice", title=None, created_at=now,
                    updated_at=now, expires_at=now)  # fmt: skip
    restored = restore_rows(thread.id, [
        StoredMessage(thread_id="", seq=n + 1, turn=1, role=m["role"], content=m["content"],
                      request_id="r1", created_at=now) for n, m in enumerate(turn(1))
    ])  # fmt: skip

    async def schema_1_rows(tx: Executor) -> None:  # a thread and its turn, as schema 1 holds them
        await tx.execute(
            old._q("INSERT INTO {p}threads (id, owner, created_at, updated_at, turns, last_seq,"  # type: ignore[attr-defined]
                   " total_chars) VALUES (?, ?, ?, ?, ?, ?, ?)"),
            thread.id, "alice", now, now, restored.turns, restored.last_seq, restored.chars,
        )  # fmt: skip
        await tx.executemany(old._q(INSERT_MESSAGE), restored.rows)  # type: ignore[attr-defined]

    await old._write(schema_1_rows)  # type: ignore[attr-defined]
    await old.aclose()
    monkeypatch.undo()

    store = await store_factory()
    assert await store.schema_version() == LATEST_SCHEMA  # type: ignore[attr-defined]
    key = {"request_id": "r2", "session_id": "S", "fingerprint": "f"}
    await store.append(thread.id, "alice", turn(2), **key)
    assert await store.append(thread.id, "alice", turn(9), **key) != []
    messages = await store.messages(thread.id, "alice")
    assert [m.content for m in messages] == ["q1", "a1", "q2", "a2"]
    found = await store.find_turn("alice", **key)
    assert found is not None and [m.content for m in found[1]] == ["q2", "a2"]
