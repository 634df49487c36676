"""Moonshot's models as the emulator serves them, through the OpenAI SDK: which
think, which controls each takes, fixed sampling, tool_choice while thinking,
and the retired ids (rules K-1 to K-4 of exai.emulators.contract)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from exai.emulators.provider import EmulatorServer
from exai.emulators.vendor_rules import RETIRED_KIMI_MODELS

from .helpers import kimi_error, user

READ = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip
K27 = ["kimi-k2.7-code", "kimi-k2.7-code-highspeed"]


def ask(client: openai.OpenAI, model: str, **extra: Any) -> Any:
    return client.chat.completions.create(model=model, messages=user(), **extra)


def reasoning(completion: Any) -> str | None:
    return getattr(completion.choices[0].message, "reasoning_content", None)


def refused(client: openai.OpenAI, model: str, **extra: Any) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, model, **extra)
    error = kimi_error(caught.value)
    assert caught.value.status_code == 400 and error["type"] == "invalid_request_error"
    return error


# [K-1] kimi-k3: always reasons, reasoning_effort low/high/max, no `thinking`.


@pytest.mark.parametrize("effort", [None, "low", "high", "max"])
def test_k3_reasons_at_every_effort_it_takes(kimi: openai.OpenAI, effort: str | None) -> None:
    extra = {} if effort is None else {"reasoning_effort": effort}
    completion = ask(kimi, "kimi-k3", **extra)
    assert reasoning(completion) and completion.choices[0].message.content


@pytest.mark.parametrize("effort", ["off", "none", "disabled", "medium", "minimal", "xhigh"])
def test_k3_refuses_other_efforts(kimi: openai.OpenAI, effort: str) -> None:
    error = refused(kimi, "kimi-k3", reasoning_effort=effort)
    assert repr(effort) in error["message"] and "low, high, max" in error["message"]


@pytest.mark.parametrize("switch", ["enabled", "disabled"])
def test_k3_refuses_the_thinking_field(kimi: openai.OpenAI, switch: str) -> None:
    error = refused(kimi, "kimi-k3", extra_body={"thinking": {"type": switch}})
    assert "thinking" in error["message"] and "reasoning_effort" in error["message"]


def test_k3_sampling_is_fixed(kimi: openai.OpenAI) -> None:  # [K-3]
    assert ask(kimi, "kimi-k3", temperature=1.0, top_p=0.95).choices[0].message.content
    error = refused(kimi, "kimi-k3", temperature=0.6)
    assert error["message"] == (
        "Invalid request: invalid temperature: only 1 is allowed for this model"
    )
    assert "only 0.95" in refused(kimi, "kimi-k3", top_p=1.0)["message"]


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "read_file"}}])  # fmt: skip
def test_k3_takes_a_forced_tool_choice_while_it_reasons(kimi: openai.OpenAI, choice: Any) -> None:
    completion = ask(kimi, "kimi-k3", tools=[READ], tool_choice=choice)  # [K-4]
    message = completion.choices[0].message
    assert message.tool_calls and message.tool_calls[0].function.name == "read_file"
    assert reasoning(completion)


# [K-1] kimi-k2.7-code and -highspeed: always think, no "disabled", no effort.


@pytest.mark.parametrize("model", K27)
def test_k27_always_thinks_and_takes_thinking_enabled(kimi: openai.OpenAI, model: str) -> None:
    assert reasoning(ask(kimi, model))
    assert reasoning(ask(kimi, model, extra_body={"thinking": {"type": "enabled"}}))


@pytest.mark.parametrize("model", K27)
def test_k27_refuses_thinking_disabled_and_effort(kimi: openai.OpenAI, model: str) -> None:
    off = refused(kimi, model, extra_body={"thinking": {"type": "disabled"}})
    assert off["message"] == f"thinking cannot be disabled for model {model}"
    effort = refused(kimi, model, reasoning_effort="high")
    assert effort["message"].startswith(f"reasoning_effort is not supported by model {model}")


@pytest.mark.parametrize("model", K27)
def test_k27_sampling_and_tool_choice(kimi: openai.OpenAI, model: str) -> None:
    assert "only 1 is allowed" in refused(kimi, model, temperature=0.6)["message"]  # [K-3]
    assert ask(kimi, model, temperature=1.0, top_p=0.95).choices[0].message.content
    forced = refused(kimi, model, tools=[READ], tool_choice="required")  # [K-4]
    assert forced["message"] == "tool_choice 'required' is incompatible with thinking enabled"
    assert ask(kimi, model, tools=[READ], tool_choice="none").choices[0].message.content


# [K-1] kimi-k2.6: switchable, no effort control.


def test_k26_thinks_unless_disabled_and_takes_no_effort(kimi: openai.OpenAI) -> None:
    assert reasoning(ask(kimi, "kimi-k2.6"))
    plain = ask(kimi, "kimi-k2.6", extra_body={"thinking": {"type": "disabled"}})
    assert not reasoning(plain) and plain.choices[0].message.content
    error = refused(kimi, "kimi-k2.6", reasoning_effort="low")
    assert "reasoning_effort is not supported by model kimi-k2.6" in error["message"]


def test_k26_temperature_follows_the_thinking_switch(kimi: openai.OpenAI) -> None:  # [K-3]
    disabled = {"extra_body": {"thinking": {"type": "disabled"}}}
    assert ask(kimi, "kimi-k2.6", temperature=0.6, **disabled).choices[0].message.content
    assert ask(kimi, "kimi-k2.6", temperature=1.0).choices[0].message.content
    assert "only 1 is allowed" in refused(kimi, "kimi-k2.6", temperature=0.6)["message"]
    assert "only 0.6 is allowed" in refused(kimi, "kimi-k2.6", temperature=1.0,
                                            **disabled)["message"]  # fmt: skip


def test_k26_forced_tool_choice_only_without_thinking(kimi: openai.OpenAI) -> None:  # [K-4]
    named = {"type": "function", "function": {"name": "read_file"}}
    error = refused(kimi, "kimi-k2.6", tools=[READ], tool_choice=named)
    assert error["message"] == "tool_choice 'specified' is incompatible with thinking enabled"
    plain = ask(kimi, "kimi-k2.6", tools=[READ], tool_choice="required",
                extra_body={"thinking": {"type": "disabled"}})  # fmt: skip
    assert plain.choices[0].message.tool_calls


# [K-2] Retired ids.


@pytest.mark.parametrize("model", sorted(RETIRED_KIMI_MODELS))
def test_retired_ids_are_not_found(kimi: openai.OpenAI, model: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        ask(kimi, model)
    assert kimi_error(caught.value) == {
        "message": f"Not found the model {model} or Permission denied",
        "type": "resource_not_found_error",
    }


def test_the_brief_s_retired_ids_are_all_there() -> None:
    for model in ["kimi-k2-thinking", "kimi-k2.5", "moonshot-v1-8k", "moonshot-v1-32k",
                  "moonshot-v1-128k", "moonshot-v1-auto", "moonshot-v1-8k-vision-preview",
                  "moonshot-v1-32k-vision-preview", "moonshot-v1-128k-vision-preview",
                  "kimi-latest", "kimi-k2-thinking-turbo"]:  # fmt: skip
        assert model in RETIRED_KIMI_MODELS


def test_the_model_listing_names_the_current_models(
    kimi: openai.OpenAI, emulator: EmulatorServer
) -> None:
    listed = [m.id for m in kimi.models.list()]
    assert listed == ["kimi-k3", "kimi-k2.7-code", "kimi-k2.7-code-highspeed", "kimi-k2.6"]
    assert not set(listed) & RETIRED_KIMI_MODELS


def test_a_generic_model_on_the_openai_path_is_not_held_to_moonshot_s_rules(
    emulator: EmulatorServer,
) -> None:
    """The Kimi path also stands in for any OpenAI-compatible server (local models)."""
    response = httpx.post(f"{emulator.base_url_kimi}/chat/completions", timeout=10, json={
        "model": "llama3.1:8b", "messages": user("one two three four five"), "max_tokens": 2,
        "temperature": 0.2, "reasoning_effort": "medium",
    })  # fmt: skip
    assert response.status_code == 200
    assert response.json()["choices"][0]["finish_reason"] == "length"
