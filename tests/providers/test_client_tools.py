"""The caller's own tools through each plugin's real SDK, against the provider emulator:
a tool round whole and streamed, the round after it, several calls at once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ProviderError
from exai.providers.base import ChatRequest, Delta
from exai.providers.exchange import ChatCompletionsProvider
from exai.providers.glm import GLMProvider
from exai.providers.kimi import KimiProvider
from exai.providers.openai_compat import OpenAICompatibleProvider

from .helpers import READ, user

GREP = {
    "type": "function",
    "function": {
        "name": "grep",
        "description": "Search files",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
    },
}
# A model of each vendor that does not think on this request, so the plugin alone
# (no registry fitting) sends what the vendor takes: Kimi K2.6 with thinking
# switched off, GLM-4.5, which thinks only when asked.
MODELS = {"kimi": "kimi-k2.6", "glm": "glm-4.5"}
THINKING = {"kimi": False, "glm": None}


@pytest.fixture(params=["kimi", "glm"])
def vendor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def plugin(vendor: str, kimi: KimiProvider, glm: GLMProvider) -> ChatCompletionsProvider:
    return kimi if vendor == "kimi" else glm


def ask(vendor: str, text: str = "read the readme", **kw: Any) -> ChatRequest:
    kw.setdefault("tools", [READ, GREP])
    kw.setdefault("messages", user(text))
    kw.setdefault("thinking", THINKING[vendor])
    return ChatRequest(model=MODELS[vendor], client_history=True, **kw)


async def collect(plugin: ChatCompletionsProvider, request: ChatRequest) -> list[Delta]:
    return [d async for d in plugin.stream(request)]


async def test_a_tool_round_ends_the_answer_with_the_calls(
    vendor: str, plugin: ChatCompletionsProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]})

    response = await plugin.complete(ask(vendor, tool_choice="auto"))

    assert response.finish_reason == "tool_calls" and response.text == ""
    (call,) = response.tool_calls
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "README.md"}
    assert response.messages == [{"role": "assistant", "content": "", "tool_calls": [call]}]
    (sent,) = emulator.requests
    assert sent["body"]["tools"] == [READ, GREP] and sent["body"]["tool_choice"] == "auto"


async def test_the_next_request_answers_from_the_tool_result(
    vendor: str, plugin: ChatCompletionsProvider, emulator: EmulatorServer
) -> None:
    emulator.script(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "It says: {last_tool_result}", "when": {"last_role": "tool"}},
    )
    first = await plugin.complete(ask(vendor))
    call = first.tool_calls[0]
    history = [
        *user("read the readme"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "# exai"},
    ]

    second = await plugin.complete(ask(vendor, messages=history))

    assert second.text == "It says: # exai" and second.finish_reason == "stop"
    assert second.tool_calls == []
    assert emulator.requests[-1]["body"]["messages"] == history  # every message arrived


async def test_streamed_calls_arrive_as_they_are_written(
    vendor: str, plugin: ChatCompletionsProvider, emulator: EmulatorServer
) -> None:
    arguments = {"path": "docs/a-rather-long-file-name.md"}
    emulator.script(
        {"text": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": arguments}]}
    )

    deltas = await collect(plugin, ask(vendor, tool_stream=True))

    kinds = [d.kind for d in deltas]
    start = kinds.index("tool_call")
    assert "text" in kinds[:start]  # Moonshot and Z.ai send the text before the calls
    assert deltas[start].index == 0
    assert deltas[start].tool_call is not None
    assert deltas[start].tool_call["function"] == {"name": "read_file", "arguments": ""}
    pieces = [d.text for d in deltas if d.kind == "tool_arguments"]
    assert len(pieces) > 1 and all(d.index == 0 for d in deltas if d.kind == "tool_arguments")
    assert json.loads("".join(pieces)) == arguments
    assert kinds[-2:] == ["usage", "done"]  # usage last, then the whole response
    response = deltas[-1].response
    assert response is not None and response.finish_reason == "tool_calls"
    assert response.tool_calls[0]["id"] == deltas[start].tool_call["id"]
    assert response.text == "Let me look."


async def test_z_ai_without_tool_stream_sends_each_call_whole(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"tool_calls": [{"name": "grep", "arguments": {"pattern": "TODO"}}]})

    deltas = await collect(glm, ask("glm", tool_stream=False))

    body = emulator.requests[0]["body"]
    assert "tool_stream" not in body
    calls = [d for d in deltas if d.kind in ("tool_call", "tool_arguments")]
    assert [d.kind for d in calls] == ["tool_call", "tool_arguments"]
    assert json.loads(calls[1].text) == {"pattern": "TODO"}


async def test_z_ai_is_asked_for_tool_stream_when_the_model_has_it(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"tool_calls": [{"name": "grep", "arguments": {"pattern": "TODO"}}]})
    await collect(glm, ask("glm", tool_stream=True))
    await glm.complete(ask("glm", tool_stream=True))

    streamed, whole = (r["body"] for r in emulator.requests)
    assert streamed["tool_stream"] is True
    assert "tool_stream" not in whole  # only a stream can stream a call


async def test_several_calls_in_one_round(
    vendor: str, plugin: ChatCompletionsProvider, emulator: EmulatorServer
) -> None:
    script = {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "a"}},
            {"name": "grep", "arguments": {"pattern": "b"}},
        ]
    }
    emulator.script(script, script)

    deltas = await collect(plugin, ask(vendor, tool_stream=True))
    whole = await plugin.complete(ask(vendor))

    starts = [d for d in deltas if d.kind == "tool_call"]
    assert [(d.index, d.tool_call["function"]["name"]) for d in starts if d.tool_call] == [
        (0, "read_file"),
        (1, "grep"),
    ]
    assert [c["function"]["name"] for c in whole.tool_calls] == ["read_file", "grep"]
    assert len({c["id"] for c in whole.tool_calls}) == 2


async def test_parallel_calls_off_returns_the_first_and_says_so(
    vendor: str, plugin: ChatCompletionsProvider, emulator: EmulatorServer
) -> None:
    script = {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "a"}},
            {"name": "grep", "arguments": {"pattern": "b"}},
        ]
    }
    emulator.script(script, script)

    whole = await plugin.complete(ask(vendor, parallel_tool_calls=False))
    deltas = await collect(plugin, ask(vendor, parallel_tool_calls=False, tool_stream=True))

    for response in (whole, deltas[-1].response):
        assert response is not None
        assert [c["function"]["name"] for c in response.tool_calls] == ["read_file"]
        assert [n["param"] for n in response.notes] == ["parallel_tool_calls"]
    assert [
        d.tool_call["function"]["name"] for d in deltas if d.kind == "tool_call" and d.tool_call
    ] == ["read_file"]
    # Neither vendor documents the parameter, so it is not sent.
    assert all("parallel_tool_calls" not in r["body"] for r in emulator.requests)


async def test_a_call_to_a_tool_nobody_offered_is_a_provider_error(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    # A request offering only exai's own web search, answered with a call to a
    # function nobody offered: what a misbehaving model would do.
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": {}}]})
    request = ChatRequest(model="kimi-k2.6", thinking=False, messages=user("x"), web_search=True)

    with pytest.raises(ProviderError, match="'read_file', which exai did not offer"):
        await kimi.complete(request)


async def test_an_openai_compatible_endpoint_gets_every_parameter(
    compat: OpenAICompatibleProvider, emulator: EmulatorServer
) -> None:
    """OpenAI's own API takes them all, so the plugin for compatible servers sends them as
    given (the registry checks nothing away for it)."""
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    emulator.script({"tool_calls": [{"name": "grep", "arguments": {"pattern": "x"}}]})
    request = ChatRequest(
        model="llama3.1:8b", messages=user("x"), tools=[READ, GREP],
        tool_choice={"type": "function", "function": {"name": "grep"}},
        parallel_tool_calls=False, seed=4, stop=["a", "b"], top_p=0.3, response_format=schema,
    )  # fmt: skip

    response = await compat.complete(request)

    body = emulator.requests[0]["body"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "grep"}}
    assert body["parallel_tool_calls"] is False and body["seed"] == 4
    assert body["stop"] == ["a", "b"] and body["top_p"] == 0.3
    assert body["response_format"] == schema
    assert response.tool_calls[0]["function"]["name"] == "grep"
