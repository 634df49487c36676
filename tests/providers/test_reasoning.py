"""Which stored reasoning each plugin sends back, through the real SDKs to the emulator."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ProviderError
from exai.providers.base import ChatRequest
from exai.providers.glm import GLMProvider
from exai.providers.kimi import KimiProvider
from exai.providers.reasoning import ReplayRule, replay_messages

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}  # fmt: skip
SEARCH = {"id": "web_search-1", "type": "builtin_function",
          "function": {"name": "$web_search", "arguments": "{}"}}  # fmt: skip


def history() -> list[dict[str, Any]]:
    """A plain thinking turn, then a tool-using one, then the new question."""
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "greet back"},
        {"role": "user", "content": "read a.py"},
        {"role": "assistant", "content": "", "tool_calls": [CALL],
         "reasoning_content": "I need the file"},
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        {"role": "assistant", "content": "it prints 1"},
        {"role": "user", "content": "and now?"},
    ]  # fmt: skip


def sent(emulator: EmulatorServer, vendor: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = emulator.requests_for(vendor)[-1]["body"]["messages"]
    return messages


async def test_glm_thinking_gets_reasoning_back_only_with_its_tool_calls(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    await glm.complete(ChatRequest(model="glm-5.1", messages=history(), thinks=True))

    messages = sent(emulator, "glm")
    assert messages[3]["reasoning_content"] == "I need the file"  # interleaved thinking
    assert messages[3]["tool_calls"][0]["id"] == "call_1" and messages[4]["role"] == "tool"
    assert "reasoning_content" not in messages[1]  # no "preserved thinking" on the API


async def test_glm_without_thinking_gets_no_reasoning(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    await glm.complete(ChatRequest(model="glm-5.1", messages=history(), thinking=False,
                                   thinks=False))  # fmt: skip

    body = emulator.requests_for("glm")[-1]["body"]
    assert body["thinking"] == {"type": "disabled"}
    assert not any("reasoning_content" in m for m in body["messages"])
    assert len(body["messages"]) == len(history())  # the tool round itself stays


async def test_kimi_thinking_keeps_tool_reasoning_and_drops_rounds_without_it(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    messages = history()
    messages[3:3] = [{"role": "assistant", "content": "", "tool_calls": [SEARCH]},
                     {"role": "tool", "tool_call_id": "web_search-1", "content": "{}"}]  # fmt: skip
    response = await kimi.complete(ChatRequest(model="kimi-k2.6", messages=messages, thinks=True))

    assert response.text  # the emulated Moonshot refuses a missing reasoning_content
    out = sent(emulator, "kimi")
    assert [m.get("tool_call_id") for m in out if m["role"] == "tool"] == ["call_1"]
    assert [m.get("reasoning_content") for m in out if m["role"] == "assistant"] == [
        None, "I need the file", None]  # fmt: skip


async def test_kimi_preserved_thinking_sends_every_answers_reasoning_back(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    """K2.7 Code wants the reasoning_content of every earlier assistant message; one
    that had none goes with an empty one, as Moonshot's own client sends it."""
    request = ChatRequest(model="kimi-k2.7-code", messages=history(), thinks=True,
                          preserved_thinking=True)  # fmt: skip
    response = await kimi.complete(request)

    assert response.text  # the emulated Moonshot refuses a message without the field
    out = sent(emulator, "kimi")
    assert [m.get("reasoning_content") for m in out if m["role"] == "assistant"] == [
        "greet back", "I need the file", ""]  # fmt: skip
    assert len(out) == len(history())

    # Without Preserved Thinking only the tool round keeps it, and K2.7 Code refuses.
    with pytest.raises(ProviderError, match="reasoning_content is missing in assistant message"):
        await kimi.complete(ChatRequest(model="kimi-k2.7-code", messages=history(), thinks=True))


async def test_the_emulated_moonshot_refuses_what_moonshot_refuses(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    import httpx

    bare = [dict(m) for m in history()]
    bare[3].pop("reasoning_content")
    async with httpx.AsyncClient(base_url=emulator.base_url_kimi) as client:
        missing = await client.post("/chat/completions", json={"model": "kimi-k2.6",
                                                               "messages": bare})  # fmt: skip
        retired = await client.post("/chat/completions", json={
            "model": "kimi-k2-0905-preview", "messages": bare[:1]})  # fmt: skip
        hot = await client.post("/chat/completions", json={
            "model": "kimi-k2.6", "messages": bare[:1], "temperature": 0.3})  # fmt: skip
        off = await client.post("/chat/completions", json={
            "model": "kimi-k2.6", "messages": bare, "thinking": {"type": "disabled"},
            "temperature": 0.6})  # fmt: skip
    assert missing.status_code == 400
    assert "reasoning_content is missing in assistant tool call message at index 3" in (
        missing.json()["error"]["message"])  # fmt: skip
    assert retired.status_code == 404
    assert retired.json()["error"]["type"] == "resource_not_found_error"
    assert hot.status_code == 400 and "only 1 is allowed" in hot.json()["error"]["message"]
    assert off.status_code == 200  # not thinking: no reasoning needed, temperature 0.6


def test_the_rule_leaves_its_input_alone_and_is_repeatable() -> None:
    original = history()
    kept = copy.deepcopy(original)
    rule = ReplayRule(tool_reasoning=True, requires_tool_reasoning=True)
    first = replay_messages(original, rule)
    assert original == kept
    assert first == replay_messages(original, rule)  # same thread, same bytes
    assert replay_messages(original, ReplayRule())[1] == {"role": "assistant", "content": "hello"}
    every = ReplayRule(tool_reasoning=True, requires_tool_reasoning=True, all_reasoning=True)
    assert [m.get("reasoning_content") for m in replay_messages(original, every)
            if m["role"] == "assistant"] == ["greet back", "I need the file", ""]  # fmt: skip
    assert original == kept
