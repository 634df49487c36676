"""The conversation store contract, run against SQLite and a real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from exai.errors import ConversationNotFoundError, ValidationError_
from exai.store.base import ANY_OWNER, ConversationStore, StoreLimits
from tests.store.conftest import LATEST_SCHEMA, FakeClock, StoreFactory

TURN = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]


def tool_turn(n: int) -> list[dict]:
    call = {"id": f"call_{n}", "type": "function",
            "function": {"name": "$web_search", "arguments": '{"q": "x"}'}}  # fmt: skip
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "name": "$web_search", "content": "found"},
        {"role": "assistant", "content": f"answer {n}"},
    ]


async def test_append_then_read_back_the_full_provider_messages(store: ConversationStore) -> None:
    thread = await store.create_thread("alice", title="greeting")
    await store.append(thread.id, "alice", TURN, request_id="r1")
    stored = await store.append(
        thread.id, "alice",
        [*tool_turn(2)[:3], {"role": "assistant", "content": "done", "reasoning_content": "hmm"},
         {"role": "user", "content": [{"type": "text", "text": "look"}]}],
        request_id="r2", model="kimi-k2", provider="kimi", usage={"prompt_tokens": 7},
        files=["/src/a.py", "/src/b.py"],
    )  # fmt: skip
    assert [m.seq for m in stored] == [3, 4, 5, 6, 7]

    messages = await store.messages(thread.id, "alice")
    assert [m.seq for m in messages] == [1, 2, 3, 4, 5, 6, 7]
    assert [m.turn for m in messages] == [1, 1, 2, 2, 2, 2, 2]
    assert messages == [*messages[:2], *stored]
    assert messages[3].tool_calls == tool_turn(2)[1]["tool_calls"]
    assert messages[4].provider_message() == tool_turn(2)[2]
    assert messages[5].reasoning == "hmm" and messages[5].content == "done"
    assert "reasoning_content" not in messages[5].provider_message()
    assert messages[6].provider_message()["content"] == [{"type": "text", "text": "look"}]
    assert messages[2].files == ["/src/a.py", "/src/b.py"] and messages[3].files is None
    assert messages[6].usage == {"prompt_tokens": 7} and messages[2].usage is None
    assert {m.model for m in stored} == {"kimi-k2"} and messages[2].request_id == "r2"

    got = await store.get_thread(thread.id, "alice")
    assert (got.turns, got.last_seq, got.title, got.owner) == (2, 7, "greeting", "alice")
    assert [m.seq for m in await store.messages(thread.id, "alice", limit=2)] == [6, 7]


async def test_start_thread_creates_a_thread_with_its_first_turn(
    store: ConversationStore,
) -> None:
    thread, stored = await store.start_thread(
        "alice", TURN, title="greeting", request_id="r1", model="glm-4.6", provider="glm",
        usage={"prompt_tokens": 3}, files=["/src/a.py"],
    )  # fmt: skip
    assert [m.seq for m in stored] == [1, 2] and {m.turn for m in stored} == {1}
    assert (thread.turns, thread.last_seq, thread.title, thread.owner) == (
        1,
        2,
        "greeting",
        "alice",
    )
    got = await store.get_thread(thread.id, "alice")
    assert (got.turns, got.last_seq, got.title) == (1, 2, "greeting")
    assert await store.messages(thread.id, "alice") == stored
    assert stored[0].files == ["/src/a.py"] and stored[1].model == "glm-4.6"
    context = await store.load_context(thread.id, "alice")
    assert context.files == ["/src/a.py"]
    # It continues like any other thread, and belongs to its owner only.
    await store.append(thread.id, "alice", TURN, request_id="r2")
    assert (await store.get_thread(thread.id, "alice")).turns == 2
    with pytest.raises(ConversationNotFoundError):
        await store.get_thread(thread.id, "bob")


async def test_start_thread_with_a_bad_turn_leaves_no_thread(store: ConversationStore) -> None:
    with pytest.raises(ValidationError_):
        await store.start_thread("alice", [{"role": "nobody", "content": "x"}], request_id="r1")
    assert await store.list_threads("alice") == []
    with pytest.raises(ValidationError_):
        await store.start_thread("", TURN, request_id="r1")


async def test_replayed_request_never_appends_twice(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    first = await store.append(thread.id, "alice", TURN, request_id="r1")
    again = await store.append(thread.id, "alice", [{"role": "user", "content": "other"}],
                               request_id="r1")  # fmt: skip
    assert again == first
    racing = await asyncio.gather(*(store.append(thread.id, "alice", TURN, request_id="r2")
                                    for _ in range(10)))  # fmt: skip
    assert all(r == racing[0] for r in racing)
    assert [m.seq for m in await store.messages(thread.id, "alice")] == [1, 2, 3, 4]


async def test_concurrent_appends_keep_one_total_order(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")

    async def turn(n: int) -> None:
        await store.append(thread.id, "alice", [{"role": "user", "content": f"q{n}"},
                                                {"role": "assistant", "content": f"a{n}"}],
                           request_id=f"r{n}")  # fmt: skip

    await asyncio.gather(*(turn(n) for n in range(40)))
    messages = await store.messages(thread.id, "alice")
    assert [m.seq for m in messages] == list(range(1, 81))
    for first, second in zip(messages[::2], messages[1::2], strict=True):
        assert first.turn == second.turn and first.content[1:] == second.content[1:]
    assert sorted(m.turn for m in messages[::2]) == list(range(1, 41))


async def test_another_owner_sees_nothing(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    await store.append(thread.id, "alice", TURN, request_id="r1")
    artifact = await store.put_artifact(thread.id, "data")
    attempts = [
        store.get_thread(thread.id, "bob"),
        store.append(thread.id, "bob", TURN, request_id="r2"),
        store.messages(thread.id, "bob"),
        store.load_context(thread.id, "bob"),
        store.fork(thread.id, "bob"),
        store.delete(thread.id, "bob"),
        store.get_artifact(thread.id, artifact, "bob"),
        store.create_thread("bob", parent_id=thread.id),
    ]
    for attempt in attempts:
        with pytest.raises(ConversationNotFoundError, match="omitting continuation_id"):
            await attempt
    assert [t.id for t in await store.list_threads("bob")] == []
    assert len(await store.messages(thread.id, "alice")) == 2


async def test_unknown_or_malformed_ids_are_not_found(store: ConversationStore) -> None:
    for bad in (str(uuid.uuid4()), "not-a-uuid", "'; DROP TABLE threads; --"):
        with pytest.raises(ConversationNotFoundError) as info:
            await store.get_thread(bad, "alice")
        assert "continuation_id" in info.value.message


async def test_threads_expire_after_ttl_without_activity(
    store_factory: StoreFactory, clock: FakeClock
) -> None:
    store = await store_factory(StoreLimits(ttl_s=100))
    thread = await store.create_thread("alice")
    clock.advance(80)
    await store.append(thread.id, "alice", TURN, request_id="r1")  # activity slides the expiry
    clock.advance(80)
    assert (await store.get_thread(thread.id, "alice")).expires_at == pytest.approx(clock.now + 20)
    clock.advance(30)
    with pytest.raises(ConversationNotFoundError, match="expired"):
        await store.append(thread.id, "alice", TURN, request_id="r2")
    assert await store.list_threads("alice") == []
    assert await store.prune() == 1
    assert await store.list_threads(include_deleted=True) == []


async def test_soft_delete_then_prune(store: ConversationStore) -> None:
    keep = await store.create_thread("alice")
    gone = await store.create_thread("alice")
    await store.append(gone.id, "alice", TURN, request_id="r1")
    await store.put_state(gone.id, "step", {"n": 1})
    await store.delete(gone.id, "alice")
    with pytest.raises(ConversationNotFoundError):
        await store.messages(gone.id, "alice")
    assert [t.id for t in await store.list_threads("alice")] == [keep.id]
    deleted = [t for t in await store.list_threads(include_deleted=True) if t.id == gone.id]
    assert deleted and deleted[0].deleted_at is not None
    assert await store.prune() == 1
    assert [t.id for t in await store.list_threads(include_deleted=True)] == [keep.id]
    assert await store.get_state(gone.id, "step") is None


async def test_fork_copies_history_up_to_a_point(store: ConversationStore) -> None:
    thread = await store.create_thread("alice", title="root")
    await store.append(thread.id, "alice", TURN, request_id="r1", files=["/a"])
    await store.append(thread.id, "alice", tool_turn(2), request_id="r2", files=["/b"])
    fork = await store.fork(thread.id, "alice", at_seq=2)
    assert (fork.parent_id, fork.fork_point, fork.depth, fork.turns) == (thread.id, 2, 1, 1)
    assert [m.content for m in await store.messages(fork.id, "alice")] == ["hello", "hi there"]
    assert (await store.load_context(fork.id, "alice")).files == ["/a"]
    await store.append(fork.id, "alice", TURN, request_id="r3")
    assert [m.seq for m in await store.messages(fork.id, "alice")] == [1, 2, 3, 4]
    assert (await store.get_thread(thread.id, "alice")).last_seq == 6
    whole = await store.fork(thread.id, "alice")
    assert len(await store.messages(whole.id, "alice")) == 6
    with pytest.raises(ValidationError_, match="tool call"):
        await store.fork(thread.id, "alice", at_seq=4)  # the call without its result
    assert (await store.fork(thread.id, "alice", at_seq=5)).last_seq == 5


async def test_fork_depth_is_limited_and_warned(store_factory: StoreFactory) -> None:
    store = await store_factory(StoreLimits(fork_max_depth=4, fork_warn_depth=2))
    thread = await store.create_thread("alice")
    chain = [thread]
    with capture_logs() as logs:
        for _ in range(4):
            chain.append(await store.fork(chain[-1].id, "alice"))
    assert [t.depth for t in chain] == [0, 1, 2, 3, 4]
    assert [e["depth"] for e in logs if e["event"] == "deep_fork"] == [3, 4]
    with pytest.raises(ValidationError_, match="at most 4 deep"):
        await store.fork(chain[-1].id, "alice")
    with pytest.raises(ValidationError_, match="at most 4 deep"):
        await store.create_thread("alice", parent_id=chain[-1].id)
    assert (await store.fork(chain[1].id, "alice")).depth == 2


async def test_no_thread_can_become_its_own_ancestor(store: ConversationStore) -> None:
    root = await store.create_thread("alice")
    child = await store.fork(root.id, "alice")
    me = str(uuid.uuid4())
    with pytest.raises(ValidationError_, match="own ancestor"):
        await store.import_thread(replace(root, id=me, parent_id=me), [])
    with pytest.raises(ValidationError_, match="already exists"):
        await store.import_thread(replace(root, parent_id=child.id), [])
    assert (await store.get_thread(root.id, "alice")).parent_id is None


async def test_max_turns_is_enforced(store_factory: StoreFactory) -> None:
    store = await store_factory(StoreLimits(max_turns=3))
    thread = await store.create_thread("alice")
    for n in range(3):
        await store.append(thread.id, "alice", TURN, request_id=f"r{n}")
    with pytest.raises(ValidationError_, match="limit of 3 turns"):
        await store.append(thread.id, "alice", TURN, request_id="r3")
    assert len(await store.append(thread.id, "alice", TURN, request_id="r0")) == 2
    assert (await store.get_thread(thread.id, "alice")).turns == 3


async def test_bad_messages_store_nothing(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    bad_turns = [
        [],
        [{"role": "robot", "content": "x"}],
        [{"role": "user", "content": 5}],
        [{"role": "user", "content": "ok"}, {"role": "tool", "content": "no id"}],
    ]
    for bad in bad_turns:
        with pytest.raises(ValidationError_):
            await store.append(thread.id, "alice", bad, request_id="r1")
    with pytest.raises(ValidationError_):
        await store.append(thread.id, "alice", TURN, request_id="")
    assert await store.messages(thread.id, "alice") == []
    assert (await store.get_thread(thread.id, "alice")).turns == 0


async def test_state_and_artifacts(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    assert await store.get_state(thread.id, "plan") is None
    await store.put_state(thread.id, "plan", {"step": 1, "notes": ["a"]})
    await store.put_state(thread.id, "plan", {"step": 2, "notes": ["a", "b"]})
    assert await store.get_state(thread.id, "plan") == {"step": 2, "notes": ["a", "b"]}
    with pytest.raises(ConversationNotFoundError):
        await store.put_state(str(uuid.uuid4()), "plan", {})

    text = "".join(f"line {n} — ok\n" for n in range(1000))
    artifact = await store.put_artifact(thread.id, text, {"tool": "codereview"})
    page = await store.get_artifact(thread.id, artifact, "alice", offset=10, limit=25)
    assert page.content == text[10:35] and page.size == len(text)
    assert page.meta == {"tool": "codereview"}
    whole = await store.get_artifact(thread.id, artifact, "alice")
    assert whole.content == text
    with pytest.raises(ConversationNotFoundError, match="artifact"):
        await store.get_artifact(thread.id, str(uuid.uuid4()), "alice")


async def test_load_context_returns_whole_newest_turns(store: ConversationStore) -> None:
    thread = await store.create_thread("alice")
    for n in range(10):
        await store.append(thread.id, "alice", [{"role": "user", "content": "u" * 100},
                                                {"role": "assistant", "content": "a" * 100}],
                           request_id=f"r{n}", files=[f"/f{n % 3}"])  # fmt: skip
    context = await store.load_context(thread.id, "alice", max_chars=650)
    assert context.turns == [8, 8, 9, 9, 10, 10]
    assert context.messages[0] == {"role": "user", "content": "u" * 100}
    assert len(context.tokens) == 6 and min(context.tokens) > 100 // 3
    assert context.files == ["/f0", "/f2", "/f1"]
    assert len((await store.load_context(thread.id, "alice")).messages) == 20
    assert (await store.load_context(thread.id, "alice", max_chars=10)).messages == []


async def test_store_survives_restart_and_migrations_rerun(store_factory: StoreFactory) -> None:
    first = await store_factory()
    thread = await first.create_thread("alice")
    await first.append(thread.id, "alice", TURN, request_id="r1")
    await first.aclose()
    second, third = await asyncio.gather(store_factory(), store_factory())
    for reopened in (second, third):
        assert await reopened.schema_version() == LATEST_SCHEMA  # type: ignore[attr-defined]
        assert await reopened.migrate() == LATEST_SCHEMA  # type: ignore[attr-defined]
        assert [m.content for m in await reopened.messages(thread.id, "alice")] == [
            "hello", "hi there"]  # fmt: skip


async def test_operator_sees_every_owner(store: ConversationStore) -> None:
    a = await store.create_thread("alice")
    b = await store.create_thread("bob")
    assert {t.id for t in await store.list_threads(ANY_OWNER)} == {a.id, b.id}
    assert {t.id for t in await store.list_threads()} == {a.id, b.id}
    assert (await store.get_thread(b.id, ANY_OWNER)).owner == "bob"


async def test_context_carries_the_reasoning_each_message_had(store: ConversationStore) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    turn = [
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning_content": "need f"},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "it is found", "reasoning_content": "done"},
    ]
    thread, stored = await store.start_thread("alice", turn, request_id="r1")
    assert [m.reasoning for m in stored] == [None, "need f", None, "done"]
    context = await store.load_context(thread.id, "alice")

    assert context.messages[1]["reasoning_content"] == "need f"
    # A plain answer's reasoning comes back too, for the vendors that want every answer's
    # (Preserved Thinking); exai.providers.reasoning leaves it out for the others.
    assert context.messages[3]["reasoning_content"] == "done"
    assert "reasoning_content" not in context.messages[2]
    # A tool round's cost counts the reasoning that may be sent with it.
    without = await store.start_thread("alice", [turn[0], {**turn[1], "reasoning_content": None},
                                                 turn[2], turn[3]], request_id="r2")  # fmt: skip
    plain = await store.load_context(without[0].id, "alice")
    assert context.tokens[1] > plain.tokens[1] and context.tokens[3] == plain.tokens[3]
