"""The OpenAI Responses API at ``/v1/responses``, driven by the real ``openai`` SDK and
the OpenAI Agents SDK through a real daemon against the provider emulator.

(Codex itself runs in tests/clients/test_agents.py.)"""

from __future__ import annotations

import json

import openai
import pytest
from openai import AsyncOpenAI

from tests.web.faces import TOKENS, base_url, faces_daemon, last_sent

READ = {
    "type": "function",
    "name": "read_file",
    "description": "Read a file of the project",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
    "reasoning": "the notes will say",
    "when": {"offers_tool": "read_file", "last_role": "user"},
}
ANSWER = {"text": "It says: {last_tool_result}", "when": {"last_role": "tool"}}


def _client(daemon, principal: str = "alice") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS[principal], max_retries=0)


async def test_a_tool_round_with_instructions_gets_its_reasoning_back_from_exai(tmp_path, emulator):
    """A client that brings back neither the reasoning nor a carrier: exai puts back
    what it kept of the round, found by the request as sent, instructions included;
    the agent session keeps it too."""
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        ask = {"model": "kimi-k2.7-code", "tools": [READ], "store": False,
               "instructions": "You are a coding agent."}  # fmt: skip
        first = await client.responses.create(input="what does notes.txt say?", **ask)
        call = next(item for item in first.output if item.type == "function_call")
        items = [
            {"role": "user", "content": "what does notes.txt say?"},
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "pelican"},
        ]
        second = await client.responses.create(input=items, **ask)
        assert second.output_text == "It says: pelican"
        await daemon.services.sessions.settled()
        (kept,) = await daemon.services.store.list_threads()
        stored = await daemon.services.store.messages(kept.id, "alice")
        kept_stats = daemon.core.stats()["tool_reasoning"]
    (sent_call,) = [m for m in last_sent(emulator)["messages"] if m.get("tool_calls")]
    assert sent_call["reasoning_content"] == "the notes will say"
    assert [m.reasoning for m in stored if m.tool_calls] == ["the notes will say"]
    # found in this daemon's memory at once, not after a miss and a read of the store
    assert (kept_stats["hits"], kept_stats["loads"]) == (1, 0), kept_stats


async def test_a_tool_round_stateless_with_the_reasoning_carried_by_the_client(tmp_path, emulator):
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        first = await client.responses.create(
            model="kimi-k2.7-code",
            input="what does notes.txt say?",
            tools=[READ],
            store=False,
            include=["reasoning.encrypted_content"],
            reasoning={"summary": "auto"},
            instructions="You are a coding agent.",
        )
        reasoning, call = first.output
        assert reasoning.type == "reasoning" and reasoning.summary[0].text == "the notes will say"
        assert call.type == "function_call" and json.loads(call.arguments) == {"path": "notes.txt"}
        items = [
            {"role": "user", "content": "what does notes.txt say?"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": call.call_id, "output": "pelican"},
        ]
        second = await client.responses.create(
            model="kimi-k2.7-code", input=items, tools=[READ], store=False
        )
        assert second.output_text == "It says: pelican" and second.status == "completed"
        # store: false keeps no response; the agent session is kept as one thread
        await daemon.services.sessions.settled()
        (kept,) = await daemon.services.store.list_threads()
        assert kept.face == "responses" and kept.turns == 2
    sent = last_sent(emulator)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]  # no instructions now
    assert sent[1]["reasoning_content"] == "the notes will say"
    assert sent[1]["tool_calls"][0]["id"] == call.call_id


async def test_a_stored_response_is_continued_by_its_owner_only(tmp_path, emulator):
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon:
        async with _client(daemon) as alice, _client(daemon, "bob") as bob:
            first = await alice.responses.create(
                model="glm-4.6", input="read notes.txt", tools=[READ], instructions="Be brief."
            )
            call = next(item for item in first.output if item.type == "function_call")
            output = {"type": "function_call_output", "call_id": call.call_id, "output": "pelican"}
            with pytest.raises(openai.NotFoundError) as caught:
                await bob.responses.create(
                    model="glm-4.6", input=[output], tools=[READ], previous_response_id=first.id
                )
            assert caught.value.body["param"] == "previous_response_id"
            second = await alice.responses.create(
                model="glm-4.6", input=[output], tools=[READ], previous_response_id=first.id
            )
            third = await alice.responses.create(
                model="glm-4.6", input="thanks", previous_response_id=second.id
            )
    assert second.output_text == "It says: pelican" and third.previous_response_id == second.id
    sent = last_sent(emulator)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "read notes.txt" and sent[3]["content"] == "It says: pelican"
    assert all(m.get("content") != "Be brief." for m in sent)  # instructions are not carried


async def test_a_stream_has_the_responses_events_and_a_function_call(tmp_path, emulator):
    emulator.script(STEP)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        stream = await client.responses.create(
            model="glm-4.6", input="read notes.txt", tools=[READ], stream=True, store=False
        )
        events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.function_call_arguments.delta" in kinds
    assert kinds[-1] == "response.completed"
    done = events[-1].response
    (call,) = [item for item in done.output if item.type == "function_call"]
    assert json.loads(call.arguments) == {"path": "notes.txt"}
    assert [e.sequence_number for e in events] == list(range(len(events)))


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools[0]"),
        ({"truncation": "auto"}, "truncation"),
        ({"background": True}, "background"),
        ({"top_logprobs": 2}, "top_logprobs"),
    ],
)
async def test_what_exai_does_not_apply_is_refused_by_name(one_daemon, emulator, extra, param):
    async with _client(one_daemon.app) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="glm-4.6", input="hi", **extra)
    assert caught.value.body["param"] == param
    assert emulator.requests == []


async def test_the_agents_sdk_runs_a_tool_loop_on_its_default_model(tmp_path, emulator):
    agents = pytest.importorskip("agents")
    emulator.script(STEP, ANSWER)
    seen: list[str] = []

    @agents.function_tool
    def read_file(path: str) -> str:
        """Read a file of the project."""
        seen.append(path)
        return "pelican"

    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        model = agents.OpenAIResponsesModel(model="glm-4.6", openai_client=client)
        agent = agents.Agent(
            name="reader", instructions="Answer from the files.", model=model, tools=[read_file]
        )
        result = await agents.Runner.run(
            agent, "what does notes.txt say?", run_config=agents.RunConfig(tracing_disabled=True)
        )
    assert seen == ["notes.txt"] and result.final_output == "It says: pelican"
    assert [m["role"] for m in last_sent(emulator)["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


async def test_a_spent_budget_is_refused_before_any_provider_request(tmp_path, emulator):
    budget = {"budgets": "alice=0.000001 USD/day"}  # less than any prompt costs
    async with faces_daemon(tmp_path, emulator, **budget) as daemon, _client(daemon) as client:
        # 400, not OpenAI's 429, for which Codex shows no message (docs/agents.md).
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="kimi-k2.6", input="hi", store=False)
    assert caught.value.body["code"] == "insufficient_quota"
    assert emulator.requests == []
