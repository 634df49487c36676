"""Stored responses of the Responses API, on both backends: a chain replays whole,
for its owner only, and never with a link missing."""

from __future__ import annotations

import pytest

from exai.errors import ConversationNotFoundError
from exai.store.base import StoreLimits

USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello",
          "tool_calls": [{"id": "c1", "type": "function",
                          "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "42"}


async def test_a_chain_of_responses_replays_every_message_in_order(store_factory):
    store = await store_factory()
    await store.put_response("resp_first0001", "alice", [USER, ANSWER])
    await store.put_response("resp_second002", "alice", [RESULT], parent_id="resp_first0001")
    await store.put_response("resp_third0003", "alice", [USER], parent_id="resp_second002")
    assert await store.response_messages("resp_third0003", "alice") == [USER, ANSWER, RESULT, USER]
    assert await store.response_messages("resp_first0001", "alice") == [USER, ANSWER]


async def test_another_principals_response_does_not_exist(store_factory):
    store = await store_factory()
    await store.put_response("resp_first0001", "alice", [USER])
    await store.put_response("resp_second002", "bob", [USER], parent_id="resp_first0001")
    for owner, response in (("bob", "resp_first0001"), ("bob", "resp_second002"),
                            ("alice", "resp_nothere01"), ("alice", "not-an-id")):  # fmt: skip
        with pytest.raises(ConversationNotFoundError) as caught:
            await store.response_messages(response, owner)
        assert caught.value.details == {"param": "previous_response_id"}


async def test_a_retried_store_keeps_the_first_and_expiry_and_pruning_remove_them(
    store_factory, clock
):
    store = await store_factory(StoreLimits(ttl_s=100))
    await store.put_response("resp_first0001", "alice", [USER])
    await store.put_response("resp_first0001", "alice", [ANSWER])
    assert await store.response_messages("resp_first0001", "alice") == [USER]
    clock.advance(60)
    await store.put_response("resp_second002", "alice", [RESULT], parent_id="resp_first0001")
    clock.advance(50)  # the first is past the TTL, the second is not: the chain is broken
    with pytest.raises(ConversationNotFoundError):
        await store.response_messages("resp_second002", "alice")
    await store.prune()
    clock.advance(-110)  # back to when both were fresh: the pruned one is gone all the same
    for response in ("resp_first0001", "resp_second002"):
        with pytest.raises(ConversationNotFoundError):
            await store.response_messages(response, "alice")
