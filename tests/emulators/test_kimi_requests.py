"""What Moonshot refuses in a request's fields and history, through the OpenAI SDK:
the deprecated output cap, untyped tool schemas, $web_search while thinking, the
reasoning a thinking request must carry back, partial mode, stop limits and
orphan tool results (rules K-5 to K-10, K-12, B-1)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from zai import ZaiClient

from exai.emulators.provider import EmulatorServer

from .helpers import kimi_error, post, user, zai_error

OFF = {"thinking": {"type": "disabled"}}
SEARCH = {"type": "builtin_function", "function": {"name": "$web_search"}}


def tool(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "pick", "parameters": parameters}}


def ask(client: openai.OpenAI, model: str = "kimi-k2.6", **extra: Any) -> Any:
    extra.setdefault("messages", user())
    return client.chat.completions.create(model=model, **extra)


def refused(client: openai.OpenAI, model: str = "kimi-k2.6", **extra: Any) -> str:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, model, **extra)
    error = kimi_error(caught.value)
    assert error["type"] == "invalid_request_error"
    return str(error["message"])


# [K-5] max_tokens is deprecated for max_completion_tokens.


@pytest.mark.parametrize("model", ["kimi-k2.6", "kimi-k3", "kimi-k2.7-code"])
def test_max_tokens_is_refused(kimi: openai.OpenAI, model: str) -> None:
    message = refused(kimi, model, max_tokens=100)
    assert message == "max_tokens is deprecated, please use max_completion_tokens"


def test_max_completion_tokens_cuts_the_reply(kimi: openai.OpenAI) -> None:
    cut = ask(kimi, max_completion_tokens=3, messages=user("tell me more"), extra_body=OFF)
    assert cut.choices[0].finish_reason == "length"
    assert cut.choices[0].message.content == "emulated reply #1 "  # three tokens


def test_glm_keeps_max_tokens(zai: ZaiClient) -> None:
    cut = zai.chat.completions.create(model="glm-4.6", messages=user(), max_tokens=3)
    assert cut.choices[0].finish_reason == "length"


# [K-6] Tool parameter schemas need a type on every property.

UNTYPED = [
    ({"type": "object", "properties": {"mode": {"enum": ["smart", "full"]}}}, "properties.mode"),
    ({"type": "object", "properties": {"files": {"type": "array", "items": {}}}},
     "properties.files.items"),
    ({"type": "object", "properties": {"env": {"type": "object",
                                               "additionalProperties": {"description": "v"}}}},
     "properties.env.additionalProperties"),
    ({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"enum": [1]}]}}},
     "properties.x.anyOf.1"),
    ({"type": "object", "properties": {"o": {"type": "object", "properties": {
        "deep": {"const": 3}}}}}, "properties.o.properties.deep"),
]  # fmt: skip


@pytest.mark.parametrize(("parameters", "path"), UNTYPED, ids=[p for _, p in UNTYPED])
def test_an_untyped_property_is_refused(
    kimi: openai.OpenAI, parameters: dict[str, Any], path: str
) -> None:
    message = refused(kimi, tools=[tool(parameters)], extra_body=OFF)
    assert message == f"At path '{path}': type is not defined"


TYPED = [
    {"type": "object", "properties": {"mode": {"type": "string", "enum": ["smart"]}}},
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/thing"}},
     "$defs": {"thing": {"type": "string"}}},
    {"type": "object"},
]  # fmt: skip


@pytest.mark.parametrize("parameters", TYPED)
def test_typed_and_combinator_schemas_pass(kimi: openai.OpenAI, parameters: dict[str, Any]) -> None:
    assert ask(kimi, tools=[tool(parameters)], extra_body=OFF).choices[0].message.content


def test_glm_does_not_check_tool_schemas(emulator: EmulatorServer) -> None:
    untyped = tool(UNTYPED[0][0])
    body = {"model": "glm-4.6", "messages": user(), "tools": [untyped]}
    assert post(emulator, "glm", body).status_code == 200


# [K-7] $web_search needs thinking disabled.


@pytest.mark.parametrize("model", ["kimi-k2.6", "kimi-k3", "kimi-k2.7-code"])
def test_web_search_while_thinking_is_refused(kimi: openai.OpenAI, model: str) -> None:
    message = refused(kimi, model, tools=[SEARCH])
    assert message.startswith("$web_search is not supported while thinking is enabled")


def test_web_search_without_thinking_searches(kimi: openai.OpenAI) -> None:
    answer = ask(kimi, tools=[SEARCH], extra_body=OFF)
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "$web_search" and answer.choices[0].finish_reason == "tool_calls"


# [K-8] A thinking request's tool-call messages carry their reasoning back.


def tool_round(**assistant: Any) -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "pick", "arguments": "{}"}}
    return [*user("x"), {"role": "assistant", "content": "", "tool_calls": [call], **assistant},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}]  # fmt: skip


def test_a_tool_call_message_without_reasoning_is_refused(kimi: openai.OpenAI) -> None:
    message = refused(kimi, messages=tool_round())
    assert message == (
        "thinking is enabled but reasoning_content is missing in assistant tool call message "
        "at index 1"
    )
    assert refused(kimi, messages=tool_round(reasoning_content=""))  # empty: missing on K2.6
    assert ask(kimi, messages=tool_round(reasoning_content="r")).choices[0].message.content
    assert ask(kimi, messages=tool_round(), extra_body=OFF).choices[0].message.content


# [K-9] Preserved Thinking on kimi-k2.7-code: every earlier assistant message.


def plain_history(**assistant: Any) -> list[dict[str, Any]]:
    return [*user("one"), {"role": "assistant", "content": "first", **assistant}, *user("two")]


@pytest.mark.parametrize("model", ["kimi-k2.7-code", "kimi-k2.7-code-highspeed"])
def test_preserved_thinking_wants_every_reasoning_back(kimi: openai.OpenAI, model: str) -> None:
    message = refused(kimi, model, messages=plain_history())
    assert message == (
        "thinking is enabled but reasoning_content is missing in assistant message at index 1"
    )
    assert ask(kimi, model, messages=plain_history(reasoning_content="")).choices  # "" counts
    assert ask(kimi, model, messages=plain_history(reasoning_content="r")).choices
    assert "tool call message at index 1" in refused(kimi, model, messages=tool_round())


def test_k26_does_not_want_plain_messages_reasoning(kimi: openai.OpenAI) -> None:
    assert ask(kimi, messages=plain_history()).choices[0].message.content


# [K-10] Partial mode while thinking.


def partial(text: str, **extra: Any) -> list[dict[str, Any]]:
    return [*user("go on"), {"role": "assistant", "content": text, "partial": True, **extra}]


def test_a_thinking_partial_continuation_needs_its_reasoning(kimi: openai.OpenAI) -> None:
    message = refused(kimi, messages=partial("emulated reply"))
    assert message == (
        "thinking is enabled but reasoning_content is missing in partial assistant message "
        "at index 1"
    )


def test_the_continuation_carries_no_new_reasoning(kimi: openai.OpenAI) -> None:
    whole = ask(kimi, messages=user("go on")).choices[0].message
    head = "emulated reply "
    rest = ask(kimi, messages=partial(head, reasoning_content=whole.reasoning_content))
    message = rest.choices[0].message
    assert head + (message.content or "") == whole.content
    assert not getattr(message, "reasoning_content", None)


def test_a_partial_continuation_without_thinking_needs_no_reasoning(kimi: openai.OpenAI) -> None:
    rest = ask(kimi, messages=partial("emulated reply "), extra_body=OFF)
    assert rest.choices[0].message.content == "#1 to: go on (saw 1 messages)"


# [K-12] Stop sequences.


def test_stop_limits(kimi: openai.OpenAI) -> None:
    assert "at most 5 strings" in refused(kimi, stop=list("abcdef"), extra_body=OFF)
    assert "at most 5 strings" in refused(kimi, stop=["x" * 33], extra_body=OFF)
    assert ask(kimi, stop=list("abcde"), extra_body=OFF).choices


# [B-1] A tool result must answer a call.


@pytest.mark.parametrize("vendor", ["kimi", "glm"])
def test_an_orphan_tool_result_is_refused(emulator: EmulatorServer, vendor: str) -> None:
    model = "kimi-k2.6" if vendor == "kimi" else "glm-4.6"
    messages = [*user("x"), {"role": "tool", "tool_call_id": "call_nobody", "content": "42"}]
    response = post(emulator, vendor, {"model": model, "messages": messages, **OFF})
    assert response.status_code == 400
    error = response.json()["error"] if vendor == "kimi" else zai_error(response)
    assert "call_nobody" in error["message"]
    assert error.get("code", error.get("type")) in ("1210", "invalid_request_error")


def test_an_unknown_chat_body_is_a_400(emulator: EmulatorServer) -> None:
    raw = httpx.post(f"{emulator.base_url_kimi}/chat/completions", content=b"{", timeout=10)
    assert raw.status_code == 400
