"""The vendors' request rules as agents meet them on the three model faces, with the
real SDK clients, a real daemon and the provider emulator enforcing Moonshot's and
Z.ai's documented rules (see exai.emulators.vendor_rules)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
from openai import AsyncOpenAI

from tests.web.faces import TOKENS, base_url, faces_daemon, last_sent

# An MCP-style tool whose "mode" property has an enum and no type: valid JSON Schema,
# refused by Moonshot ("At path 'properties.mode': type is not defined").
ENUM_ONLY = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "mode": {"description": "How to read", "enum": ["head", "all"]},
        "limit": {"anyOf": [{"enum": [10, 100]}, {"type": "null"}]},
    },
    "required": ["path"],
}
OPENAI_TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file", "parameters": ENUM_ONLY}}  # fmt: skip
STEP = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt", "mode": "all"}}]}


def _sent_schema(emulator: Any) -> dict[str, Any]:
    (tool,) = last_sent(emulator)["tools"]
    return tool["function"]["parameters"]


def _typed(schema: dict[str, Any]) -> None:
    props = schema["properties"]
    assert props["mode"] == {"description": "How to read", "enum": ["head", "all"],
                             "type": "string"}  # fmt: skip
    assert props["limit"]["anyOf"] == [{"enum": [10, 100], "type": "integer"},
                                       {"type": "null"}]  # fmt: skip


def _openai(daemon: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS["alice"], max_retries=0)


async def test_an_enum_only_schema_reaches_kimi_typed_on_chat_completions(tmp_path, emulator):
    emulator.script(STEP)
    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        answer = await client.chat.completions.create(
            model="kimi-k2.6", messages=[{"role": "user", "content": "read a.txt"}],
            tools=[OPENAI_TOOL],
        )  # fmt: skip
    (call,) = answer.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"path": "a.txt", "mode": "all"}
    _typed(_sent_schema(emulator))


async def test_an_enum_only_schema_reaches_kimi_typed_on_messages(tmp_path, emulator):
    emulator.script(STEP)
    async with faces_daemon(tmp_path, emulator, anthropic_models="claude-*=kimi-k2.6") as d:
        async with anthropic.AsyncAnthropic(
            base_url=base_url(d, ""), api_key=TOKENS["alice"], max_retries=0
        ) as client:
            answer = await client.messages.create(
                model="claude-sonnet-5", max_tokens=1024,
                messages=[{"role": "user", "content": "read a.txt"}],
                tools=[{"name": "read_file", "description": "Read a file",
                        "input_schema": ENUM_ONLY}],
            )  # fmt: skip
    assert answer.stop_reason == "tool_use"
    _typed(_sent_schema(emulator))


async def test_an_enum_only_schema_reaches_kimi_typed_on_responses(tmp_path, emulator):
    emulator.script(STEP)
    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        answer = await client.responses.create(
            model="kimi-k2.6", input="read a.txt", store=False,
            tools=[{"type": "function", "name": "read_file", "description": "Read a file",
                    "parameters": ENUM_ONLY}],
        )  # fmt: skip
    assert [item.type for item in answer.output][-1] == "function_call"
    _typed(_sent_schema(emulator))


async def test_glm_gets_the_schema_as_the_agent_sent_it(tmp_path, emulator):
    emulator.script(STEP)
    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        await client.chat.completions.create(
            model="glm-5.2", messages=[{"role": "user", "content": "read a.txt"}],
            tools=[OPENAI_TOOL],
        )  # fmt: skip
    assert _sent_schema(emulator) == ENUM_ONLY


async def test_k3_gets_reasoning_effort_and_no_thinking_switch(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        answer = await client.chat.completions.create(
            model="kimi-k3", messages=[{"role": "user", "content": "think hard"}],
            reasoning_effort="medium",
        )  # fmt: skip
    sent = last_sent(emulator)
    assert sent["reasoning_effort"] == "high" and "thinking" not in sent
    notes = (answer.model_extra or {})["exai"]["notes"]
    assert any(n["param"] == "reasoning_effort" and "'medium' was sent as 'high'" in n["message"]
               for n in notes)  # fmt: skip


async def test_a_tool_result_answering_no_call_is_a_400_naming_the_message(tmp_path, emulator):
    import openai

    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        try:
            await client.chat.completions.create(
                model="kimi-k2.6",
                messages=[{"role": "user", "content": "hi"},
                          {"role": "tool", "tool_call_id": "call_nobody", "content": "x"}],
            )  # fmt: skip
        except openai.BadRequestError as exc:
            refused = exc
        else:
            raise AssertionError("a tool result answering no call was accepted")
    assert "messages[1]" in str(refused) and "call_nobody" in str(refused)
    assert emulator.requests == []  # refused before any provider request
