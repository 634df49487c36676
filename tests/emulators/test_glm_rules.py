"""What Z.ai refuses and how its models think, through zai-sdk: reasoning_effort
on GLM-5.2 and above, GLM-5.3's thinking that cannot be turned off, tool_choice
and stop limits, and the 1305 wording (rules G-1 to G-4, G-8)."""

from __future__ import annotations

from typing import Any

import pytest
from zai import ZaiClient
from zai.core._errors import APIStatusError

from exai.emulators.models import GLM_EFFORTS
from exai.emulators.provider import EmulatorServer

from .helpers import user, zai_error


def ask(client: ZaiClient, model: str, **extra: Any) -> Any:
    return client.chat.completions.create(model=model, messages=user(), **extra)


def reasoning(completion: Any) -> str | None:
    return getattr(completion.choices[0].message, "reasoning_content", None)


def refused(client: ZaiClient, model: str, **extra: Any) -> str:
    with pytest.raises(APIStatusError) as caught:
        ask(client, model, **extra)
    error = zai_error(caught.value)
    assert caught.value.response.status_code == 400 and error["code"] == "1210"
    return str(error["message"])


# [G-1] reasoning_effort: glm-5.2 and above only.


@pytest.mark.parametrize("effort", GLM_EFFORTS)
def test_glm52_takes_every_documented_effort(zai: ZaiClient, effort: str) -> None:
    completion = ask(zai, "glm-5.2", reasoning_effort=effort)
    assert completion.choices[0].message.content
    assert bool(reasoning(completion)) is (effort != "none")  # "none": no reasoning


def test_glm52_thinks_by_default_and_can_stop(zai: ZaiClient) -> None:
    assert reasoning(ask(zai, "glm-5.2"))
    assert not reasoning(ask(zai, "glm-5.2", thinking={"type": "disabled"}))


def test_an_unknown_effort_is_refused(zai: ZaiClient) -> None:
    message = refused(zai, "glm-5.2", reasoning_effort="extreme")
    assert "'extreme'" in message and "none, minimal, low, medium, high, xhigh, max" in message


@pytest.mark.parametrize("model", ["glm-5.1", "glm-5", "glm-4.7", "glm-4.6", "glm-4.5-air"])
def test_effort_below_glm52_is_refused(zai: ZaiClient, model: str) -> None:
    message = refused(zai, model, reasoning_effort="high")
    assert (
        message
        == f"reasoning_effort is not supported by model {model} (only glm-5.2 and above take it)"
    )


# [G-2] glm-5.3 thinks always; the older families by default or on request.


def test_glm53_always_thinks(zai: ZaiClient) -> None:
    assert reasoning(ask(zai, "glm-5.3"))
    assert reasoning(ask(zai, "glm-5.3", thinking={"type": "enabled"}, reasoning_effort="max"))
    off = refused(zai, "glm-5.3", thinking={"type": "disabled"})
    assert off == "thinking cannot be disabled for model glm-5.3"
    assert "cannot be disabled" in refused(zai, "glm-5.3", reasoning_effort="none")


@pytest.mark.parametrize(("model", "by_default"), [("glm-5.1", True), ("glm-4.7", True),
                                                   ("glm-4.6", False)])  # fmt: skip
def test_older_families_think_by_default_or_when_asked(
    zai: ZaiClient, model: str, by_default: bool
) -> None:
    assert bool(reasoning(ask(zai, model))) is by_default
    assert reasoning(ask(zai, model, thinking={"type": "enabled"}))
    assert not reasoning(ask(zai, model, thinking={"type": "disabled"}))


# [G-3] [G-4] tool_choice "auto" only, one stop word.


def test_tool_choice_other_than_auto_is_refused(zai: ZaiClient) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert refused(zai, "glm-4.6", tools=tools, tool_choice="required") == (
        "tool_choice only supports auto, not required"
    )
    assert ask(zai, "glm-4.6", tools=tools, tool_choice="auto").choices


def test_more_than_one_stop_word_is_refused(zai: ZaiClient) -> None:
    assert refused(zai, "glm-4.6", stop=["a", "b"]) == "stop supports only one stop word"
    assert ask(zai, "glm-4.6", stop=["a"]).choices


# [G-8] 1305 is a rate limit.


def test_1305_reads_as_z_ai_documents_it(zai: ZaiClient, emulator: EmulatorServer) -> None:
    emulator.script({"status": 429, "error": "overloaded"})
    with pytest.raises(APIStatusError) as caught:
        ask(zai, "glm-4.6")
    assert caught.value.response.status_code == 429
    assert zai_error(caught.value) == {
        "code": "1305",
        "message": "The API has triggered a rate limit.",
    }
