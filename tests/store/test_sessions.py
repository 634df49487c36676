"""Agent sessions in the store, on SQLite and on Postgres: which thread a request
continues, retries, branches, lineage, owners, and listing sessions by face and client."""

from __future__ import annotations

import itertools
from typing import Any

from exai.store.base import ConversationStore
from exai.store.costs import CostRow
from exai.store.sessions import SessionTurn
from tests.store.conftest import StoreFactory

_ids = itertools.count(1)


def _turn(
    messages: list[dict[str, Any]], answer: str, owner: str = "alice", **kw: Any
) -> SessionTurn:
    kw.setdefault("face", "anthropic")
    answered = {"role": "assistant", "content": answer}
    return SessionTurn(owner=owner, messages=messages, answer=answered,
                       request_id=f"r{next(_ids)}", session_id="S", **kw)  # fmt: skip


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


async def _contents(store: ConversationStore, thread_id: str) -> list[str | None]:
    return [m.content for m in await store.messages(thread_id, "alice")]


async def test_a_continuation_extends_its_thread_even_as_the_client_reshapes_messages(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"a": 1}'}}
    first = await store.keep_session_turn(SessionTurn(
        owner="alice", messages=[{"role": "system", "content": "sys"}, user("q")],
        answer={"role": "assistant", "content": "", "tool_calls": [call],
                "reasoning_content": "think"},
        request_id="r-a", session_id="S", face="anthropic", client="Claude Code 2.1"))  # fmt: skip
    assert first.kept == "started"
    # the agent echoes the call with re-serialized arguments and without the reasoning,
    # its text as a list of parts, a new system prompt
    echoed = {
        "role": "assistant",
        "content": [{"type": "text", "text": ""}],
        "tool_calls": [{**call, "function": {"name": "Read", "arguments": '{ "a":1 }'}}],
    }
    second = await store.keep_session_turn(_turn(
        [{"role": "system", "content": "sys, later"}, user("q"), echoed,
         {"role": "tool", "tool_call_id": "c1", "content": "data"}], "done"))  # fmt: skip
    assert (second.kept, second.thread_id) == ("continued", first.thread_id)
    messages = await store.messages(first.thread_id, "alice")
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2].reasoning == "think" and messages[2].tool_calls == [call]
    thread = await store.get_thread(first.thread_id, "alice")
    assert (thread.face, thread.client, thread.title, thread.turns) == (
        "anthropic", "Claude Code 2.1", "q", 2)  # fmt: skip


async def test_a_retry_writes_nothing_and_its_answer_is_continued(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    first = await store.keep_session_turn(_turn([user("q")], "a1"))
    retry = await store.keep_session_turn(_turn([user("q")], "a2"))
    assert retry.kept == "retried" and retry.thread_id == first.thread_id
    after = await store.keep_session_turn(_turn([user("q"), said("a2"), user("next")], "a3"))
    assert (after.kept, after.thread_id) == ("continued", first.thread_id)
    assert await _contents(store, first.thread_id) == ["q", "a1", "next", "a3"]


async def test_a_second_request_on_an_answered_prefix_branches_into_a_fork(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    root = await store.keep_session_turn(_turn([user("q")], "a"))
    left = await store.keep_session_turn(_turn([user("q"), said("a"), user("left")], "l"))
    right = await store.keep_session_turn(_turn([user("q"), said("a"), user("right")], "r"))
    assert left.thread_id == root.thread_id and right.kept == "branched"
    fork = await store.get_thread(right.thread_id, "alice")
    assert (fork.parent_id, fork.fork_point, fork.face) == (root.thread_id, 2, "anthropic")
    assert await _contents(store, right.thread_id) == ["q", "a", "right", "r"]
    # each branch goes on where it is
    more = await store.keep_session_turn(
        _turn([user("q"), said("a"), user("right"), said("r"), user("on")], "o"))  # fmt: skip
    assert (more.kept, more.thread_id) == ("continued", right.thread_id)


async def test_a_rewritten_history_under_the_same_session_ref_follows_the_old_thread(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    old = await store.keep_session_turn(_turn([user("q")], "a", ref="sess-1"))
    new = await store.keep_session_turn(_turn([user("summary of q")], "b", ref="sess-1"))
    other = await store.keep_session_turn(_turn([user("unrelated")], "c", ref="sess-2"))
    assert new.kept == "started" and new.follows == old.thread_id and other.follows is None
    assert (await store.get_thread(new.thread_id, "alice")).follows == old.thread_id


async def test_an_identical_history_of_another_principal_is_never_continued(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    alice = await store.keep_session_turn(_turn([user("q")], "a", ref="shared"))
    bob = await store.keep_session_turn(_turn([user("q"), said("a"), user("more")], "b", "bob",
                                              ref="shared"))  # fmt: skip
    assert bob.kept == "started" and bob.thread_id != alice.thread_id and bob.follows is None
    assert await _contents(store, alice.thread_id) == ["q", "a"]
    fresh = await store.keep_session_turn(_turn([user("q")], "x", "carol"))
    assert fresh.kept == "started"  # alice's turn is no retry of carol's
    retry = await store.keep_session_turn(_turn([user("q")], "x", "bob"))
    assert (retry.kept, retry.thread_id) == ("retried", bob.thread_id)  # bob's own history


async def test_a_deleted_session_is_not_continued(store_factory: StoreFactory) -> None:
    store = await store_factory()
    gone = await store.keep_session_turn(_turn([user("q")], "a"))
    await store.delete(gone.thread_id, "alice")
    again = await store.keep_session_turn(_turn([user("q"), said("a"), user("more")], "b"))
    assert again.kept == "started" and again.thread_id != gone.thread_id
    await store.prune()
    assert [t.id for t in await store.list_threads("alice")] == [again.thread_id]


async def test_sessions_are_listed_by_face_and_client(store_factory: StoreFactory) -> None:
    store = await store_factory()
    claude = await store.keep_session_turn(_turn([user("1")], "a", client="Claude Code 2.1"))
    codex = await store.keep_session_turn(
        _turn([user("2")], "b", face="responses", client="Codex 0.9_%"))  # fmt: skip
    plain = await store.create_thread("alice", title="a chat thread")

    async def ids(**kw: Any) -> set[str]:
        return {t.id for t in await store.list_threads("alice", **kw)}

    assert await ids() == {claude.thread_id, codex.thread_id, plain.id}
    assert await ids(agent=True) == {claude.thread_id, codex.thread_id}
    assert await ids(agent=False) == {plain.id}
    assert await ids(face="responses") == {codex.thread_id}
    assert await ids(client="claude") == {claude.thread_id}
    assert await ids(client="0.9_%") == {codex.thread_id}
    assert await ids(client="9__") == set()  # _ and % are the text, not patterns
    found = await store.search_threads("alice", "b", agent=True, face="responses")
    assert [t.id for t in found] == [codex.thread_id]
    await store.keep_session_turn(_turn([user("2"), said("b"), user("more")], "c",
                                        face="responses", client="Codex 0.9_%"))  # fmt: skip
    fork = await store.fork(codex.thread_id, "alice")
    follower = await store.keep_session_turn(_turn([user("anew")], "d", ref="r1"))
    again = await store.keep_session_turn(_turn([user("anew2")], "e", ref="r1"))
    assert [t.id for t in await store.related_threads(codex.thread_id, "alice")] == [fork.id]
    assert [t.id for t in await store.related_threads(follower.thread_id, "alice")] == [
        again.thread_id]  # fmt: skip
    assert await store.related_threads(codex.thread_id, "bob") == []


async def test_a_session_is_found_by_its_prompts_and_tool_calls(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    call = {"id": "c1", "type": "function",
            "function": {"name": "Grep", "arguments": '{"pattern": "flamingo"}'}}  # fmt: skip
    prompt = {"role": "user", "content": [{"type": "text", "text": "Find the Pelican"}]}
    kept = await store.keep_session_turn(SessionTurn(
        owner="alice", messages=[prompt], request_id="r-s", session_id="S", face="anthropic",
        answer={"role": "assistant", "content": None, "tool_calls": [call]}))  # fmt: skip
    for text in ("pelican", "flamingo", "grep"):
        assert [t.id for t in await store.search_threads("alice", text)] == [kept.thread_id]
    assert await store.search_threads("bob", "pelican") == []


async def test_each_thread_s_cost_is_its_turns_costs_in_one_query(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    kept = {}
    for request_id, text in (("r-x", "one"), ("r-y", "two")):
        kept[request_id] = await store.keep_session_turn(SessionTurn(
            owner="alice", messages=[user(text)], answer=said("a"), request_id=request_id,
            session_id="S", face="openai"))  # fmt: skip
    rows = [CostRow(1.0, "i", principal, "completion", "S", request_id, None, "kimi-k2.6",
                    "kimi", 1, 0, 1, 0, "USD", 0, 0, 0, nanos)
            for principal, request_id, nanos in (
                ("alice", "r-x", 5), ("alice", "r-x", 2), ("alice", "r-y", 7), ("bob", "r-y", 9))
            ]  # fmt: skip
    await store.record_costs(rows)
    ids = [k.thread_id for k in kept.values()]
    assert await store.thread_costs(ids, "alice") == {ids[0]: {"USD": 7}, ids[1]: {"USD": 7}}
    assert await store.thread_costs(ids, "bob") == {}


async def test_a_turn_kept_after_the_one_that_continued_it_is_not_kept_twice(
    store_factory: StoreFactory,
) -> None:
    """Two daemons: the agent's next request reached the other daemon, whose keeper
    wrote it before this daemon's keeper wrote the request it continues."""
    store = await store_factory()
    first = await store.keep_session_turn(_turn([user("q1")], "a1"))
    later = await store.keep_session_turn(
        _turn([user("q1"), said("a1"), user("q2"), said("a2"), user("q3")], "a3"))  # fmt: skip
    late = await store.keep_session_turn(_turn([user("q1"), said("a1"), user("q2")], "a2"))
    assert later.thread_id == first.thread_id and later.kept == "continued"
    assert (late.kept, late.thread_id) == ("retried", first.thread_id)
    # a new session whose second request is kept before its first
    second = await store.keep_session_turn(_turn([user("p1"), said("b1"), user("p2")], "b2"))
    early = await store.keep_session_turn(_turn([user("p1")], "b1"))
    assert (early.kept, early.thread_id) == ("retried", second.thread_id)
    assert await _contents(store, first.thread_id) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert len(await store.list_threads("alice")) == 2


async def test_a_new_session_opening_like_an_earlier_one_is_its_own(
    store_factory: StoreFactory,
) -> None:
    """Two Claude Code sessions with the same first prompt, answered by a tool call."""
    store = await store_factory()
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "data"}
    threads = []
    for ref in ("sess-a", "sess-b"):
        first = await store.keep_session_turn(SessionTurn(
            owner="alice", messages=[user("run the tests")], answer=asked, request_id=f"{ref}-1",
            session_id="S", face="anthropic", ref=ref))  # fmt: skip
        second = await store.keep_session_turn(SessionTurn(
            owner="alice", messages=[user("run the tests"), asked, result],
            answer=said(f"done {ref}"), request_id=f"{ref}-2", session_id="S",
            face="anthropic", ref=ref))  # fmt: skip
        assert first.kept == "started" and second.kept == "continued"
        assert second.thread_id == first.thread_id
        threads.append(first.thread_id)
    assert threads[0] != threads[1]
    # without a reference of the client's own, the same requests are a retry and a
    # branch, which may start between the call and its result
    again = await store.keep_session_turn(SessionTurn(
        owner="alice", messages=[user("run the tests"), asked, {**result, "content": "other"}],
        answer=said("done c"), request_id="c-2", session_id="S", face="openai"))  # fmt: skip
    assert again.kept == "branched"
    assert await _contents(store, again.thread_id) == ["run the tests", None, "other", "done c"]
