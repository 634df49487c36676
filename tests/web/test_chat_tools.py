"""Agents on ``/v1/chat/completions``: the ``openai`` SDK runs function-calling loops
through a real daemon against the provider emulator, scripted to call tools.

Every parameter is either applied (the emulator's recorded request shows it),
adapted with a note in ``exai.notes``, or refused with a 400 naming it; the
agent's next request reaches the model whole."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import openai
import pytest
from openai import AsyncOpenAI

from exai.memory.block import BLOCK_START
from tests.clients.recorder import RecordingProxy, write_round
from tests.web.faces import (
    BASH,
    READ,
    TOKENS,
    base_url,
    faces_daemon,
    last_sent,
    sent_bodies,
)

QUESTION = [{"role": "user", "content": "what does notes.txt say?"}]
STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
    "when": {"offers_tool": "read_file", "last_role": "user"},
}
ANSWER = {"text": "It says: {last_tool_result}", "when": {"last_role": "tool"}}
NO_THINKING = {"thinking": {"type": "disabled"}}


def _client(daemon, principal: str = "alice") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS[principal], max_retries=0)


def _run_tool(call) -> str:
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "notes.txt"}
    return "the secret word is pelican"


async def test_a_function_calling_loop_runs_stateless_and_whole(tmp_path, emulator):
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        messages = list(QUESTION)
        first = await client.chat.completions.create(
            model="kimi-k2.6", messages=messages, tools=[READ], tool_choice="auto"
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.type == "function" and call.id
        result = {"role": "tool", "tool_call_id": call.id, "content": _run_tool(call)}
        messages += [choice.message.model_dump(exclude_none=True), result]
        second = await client.chat.completions.create(
            model="kimi-k2.6", messages=messages, tools=[READ]
        )
        assert second.choices[0].message.content == "It says: the secret word is pelican"
        assert second.choices[0].finish_reason == "stop"
        # Nothing was read from the store; the session was kept after each answer.
        await daemon.services.sessions.settled()
        (kept,) = await daemon.services.store.list_threads()
        assert kept.face == "openai" and kept.turns == 2
    sent = last_sent(emulator)
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert sent["messages"][1]["tool_calls"][0]["id"] == call.id
    assert sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": "the secret word is pelican",
    }
    assert [t["function"]["name"] for t in sent["tools"]] == ["read_file"]


async def test_a_function_calling_loop_runs_streamed(tmp_path, emulator):
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        stream = await client.chat.completions.create(
            model="glm-4.6",
            messages=QUESTION,
            tools=[READ, BASH],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        pieces = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
        assert pieces[0].index == 0 and pieces[0].id and pieces[0].function.name == "read_file"
        arguments = "".join(p.function.arguments or "" for p in pieces)
        assert json.loads(arguments) == {"path": "notes.txt"}
        ends = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert ends[-1] == "tool_calls" and chunks[-1].choices == []
        assert chunks[-1].usage.total_tokens > 0
        call_id = pieces[0].id
        history = [
            *QUESTION,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "pelican"},
        ]
        stream = await client.chat.completions.create(
            model="glm-4.6", messages=history, tools=[READ, BASH], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "It says: pelican"
    assert len(last_sent(emulator)["messages"]) == 3


@pytest.mark.parametrize(
    ("choice", "called"),
    [
        ("none", None),
        ("required", "read_file"),
        ({"type": "function", "function": {"name": "bash"}}, "bash"),
    ],
    ids=["none", "required", "named"],
)
async def test_tool_choice_is_applied(one_daemon, emulator, choice, called):
    async with _client(one_daemon.app) as client:
        completion = await client.chat.completions.create(
            model="kimi-k2.6",
            messages=QUESTION,
            tools=[READ, BASH],
            tool_choice=choice,
            extra_body=NO_THINKING,
        )
    assert last_sent(emulator)["tool_choice"] == choice
    calls = completion.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ([called] if called else [])


async def test_a_thinking_kimi_round_reaches_the_model_with_every_message(tmp_path, emulator):
    """No OpenAI client sends reasoning_content back; exai puts it back on the round."""
    emulator.script({**STEP, "reasoning": "I should read the file"}, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        first = await client.chat.completions.create(
            model="kimi-k2.7-code", messages=QUESTION, tools=[READ]
        )
        (call,) = first.choices[0].message.tool_calls
        history = [
            *QUESTION,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "pelican"},
            {"role": "user", "content": "and in French?"},
        ]
        second = await client.chat.completions.create(
            model="kimi-k2.7-code", messages=history, tools=[READ]
        )
        assert second.choices[0].message.content
    sent = last_sent(emulator)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[1]["reasoning_content"] == "I should read the file"
    assert sent[1]["tool_calls"][0]["id"] == call.id and sent[3]["content"] == "and in French?"


async def test_legacy_functions_run_a_loop_too(tmp_path, emulator):
    emulator.script(STEP, ANSWER)
    function = READ["function"]
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        first = await client.chat.completions.create(
            model="glm-4.6", messages=QUESTION, functions=[function]
        )
        assert first.choices[0].finish_reason == "function_call"
        asked = first.choices[0].message.function_call
        assert asked.name == "read_file"
        history = [
            *QUESTION,
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": asked.name, "arguments": asked.arguments},
            },
            {"role": "function", "name": "read_file", "content": "pelican"},
        ]
        second = await client.chat.completions.create(
            model="glm-4.6", messages=history, functions=[function]
        )
    assert second.choices[0].message.content == "It says: pelican"
    sent = last_sent(emulator)
    assert sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_fn_1",
        "content": "pelican",
    }
    assert sent["tools"] == [READ]


PARAMETERS = [
    ("stop", ["END"]),
    ("top_p", 0.5),
    ("seed", 7),
    ("response_format", {"type": "json_object"}),
    ("max_tokens", 64),
    ("temperature", 0.3),
    ("parallel_tool_calls", False),
]


@pytest.mark.parametrize(("name", "value"), PARAMETERS, ids=[p[0] for p in PARAMETERS])
@pytest.mark.parametrize("model", ["kimi-k2.6", "glm-4.6"])
async def test_each_parameter_is_applied_adapted_with_a_note_or_refused_by_name(
    one_daemon, emulator, model, name, value
):
    extra = {"tools": [READ]} if name == "parallel_tool_calls" else {}
    async with _client(one_daemon.app) as client:
        try:
            completion = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "reply in JSON"}],
                **{name: value},
                **extra,
            )
        except openai.BadRequestError as refused:
            assert refused.body["param"] == name and refused.body["message"]
            assert emulator.requests == []
            return
    sent = last_sent(emulator)
    wire = {"max_tokens": sent.get("max_tokens", sent.get("max_completion_tokens"))}
    notes = [n["param"] for n in completion.exai.get("notes", [])]
    assert sent.get(name, wire.get(name)) == value or name in notes, (sent, notes)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logit_bias": {"1": 2}}, "logit_bias"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"n": 2}, "n"),
        ({"store": True}, "store"),
        ({"top_logprobs": 2}, "top_logprobs"),
    ],
)
async def test_what_exai_does_not_apply_is_refused_by_name(one_daemon, emulator, extra, param):
    async with _client(one_daemon.app) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="kimi-k2.6", messages=QUESTION, **extra)
    assert caught.value.body["param"] == param
    assert emulator.requests == []


async def test_memory_reaches_the_model_in_a_marked_block_for_its_owner_only(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator, faces_memory=["alice"]) as daemon:
        memory = daemon.services.memory
        await memory.remember("alice", "Alice's project uses tabs, never spaces", type="rule")
        await memory.remember("bob", "Bob's project uses spaces, never tabs", type="rule")
        system = {"role": "system", "content": "You are a coding agent."}
        ask = [system, {"role": "user", "content": "tabs or spaces for this project?"}]
        for principal in ("alice", "bob"):
            async with _client(daemon, principal) as client:
                reply = await client.chat.completions.create(model="glm-4.6", messages=ask)
                assert reply.choices[0].message.content
    chats = [b for b in sent_bodies(emulator) if "messages" in b]
    alice, bob = chats[-2]["messages"], chats[-1]["messages"]
    # Alice's: her system prompt untouched, then her memories, then her message.
    assert alice[0] == system and alice[-1] == ask[-1] and len(alice) == 3
    assert alice[1]["role"] == "system" and BLOCK_START in alice[1]["content"]
    assert "Alice's project uses tabs" in alice[1]["content"]
    assert "Bob" not in json.dumps(alice)
    assert bob == ask  # not in EXAI_FACES_MEMORY: no block


async def test_routing_rules_apply_to_model_face_requests(tmp_path, emulator):
    rules = json.dumps([{"when": {"tool": "completion"}, "model": "glm-4.6"}])
    async with (
        faces_daemon(tmp_path, emulator, routing_rules=rules) as daemon,
        _client(daemon) as client,
    ):
        completion = await client.chat.completions.create(model="auto", messages=QUESTION)
    assert completion.exai["model"] == "glm-4.6" and emulator.requests[-1]["vendor"] == "glm"


async def test_a_recorded_tool_round(tmp_path, emulator):
    """One tool round through a recording pass-through, written to build/agents/."""
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator) as daemon:
        proxy = RecordingProxy(base_url(daemon, ""))
        proxy.start()
        try:
            client = AsyncOpenAI(
                base_url=proxy.base_url + "/v1", api_key=TOKENS["alice"], max_retries=0
            )
            async with client:
                first = await client.chat.completions.create(
                    model="kimi-k2.6", messages=QUESTION, tools=[READ], stream=True
                )
                pieces = [
                    tc
                    async for c in first
                    if c.choices
                    for tc in c.choices[0].delta.tool_calls or []
                ]
                call = {
                    "id": pieces[0].id,
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": "".join(p.function.arguments or "" for p in pieces),
                    },
                }
                history = [
                    *QUESTION,
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call["id"], "content": "pelican"},
                ]
                second = await client.chat.completions.create(
                    model="kimi-k2.6", messages=history, tools=[READ], stream=True
                )
                text = "".join(
                    [c.choices[0].delta.content or "" async for c in second if c.choices]
                )
        finally:
            proxy.stop()
    assert text == "It says: pelican"
    rounds = [e for e in proxy.exchanges if e["path"] == "/v1/chat/completions"]
    assert len(rounds) == 2 and b'"tool_calls"' in rounds[0]["response"]
    write_round("openai-chat", rounds)


async def test_the_docs_openai_agent_configuration_runs_a_tool_round(
    tmp_path, emulator, monkeypatch
):
    """docs/agents.md's environment for OpenAI-compatible agents, read the way the openai
    SDK (and the agents built on it) read it: no argument but the environment."""
    doc = (Path(__file__).parents[2] / "docs" / "agents.md").read_text()
    (body,) = re.findall(r"<!-- snippet: openai-agent -->\n```sh\n(.*?)\n```", doc, re.S)
    exported = dict(re.findall(r"^export (\w+)=(.*)$", body, re.M))
    emulator.script(STEP, ANSWER)
    async with faces_daemon(tmp_path, emulator, ws_token=exported["OPENAI_API_KEY"]) as daemon:
        for name, value in exported.items():
            monkeypatch.setenv(name, value.replace("http://127.0.0.1:8078", base_url(daemon, "")))
        async with AsyncOpenAI(max_retries=0) as client:
            model = os.environ["OPENAI_MODEL"]
            first = await client.chat.completions.create(
                model=model, messages=QUESTION, tools=[READ]
            )
            (call,) = first.choices[0].message.tool_calls
            history = [
                *QUESTION,
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "pelican"},
            ]
            second = await client.chat.completions.create(
                model=model, messages=history, tools=[READ]
            )
    assert second.choices[0].message.content == "It says: pelican"
    assert last_sent(emulator)["model"] == exported["OPENAI_MODEL"]
