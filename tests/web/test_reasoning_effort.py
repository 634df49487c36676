"""An agent's effort level reaches the model on every model face: the face passes it
to the core as ``reasoning_effort``, and the core sends each model its own knob (a
level to GLM-5.2 and Kimi K3, the thinking switch to older models) and notes what it
changed, which the answer carries."""

from __future__ import annotations

from typing import Any

import anthropic
from openai import AsyncOpenAI

from tests.web.faces import TOKENS, base_url, faces_daemon, last_sent

ASK = [{"role": "user", "content": "think it over"}]


def _openai(daemon: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS["alice"], max_retries=0)


def _anthropic(daemon: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=base_url(daemon, ""), api_key=TOKENS["alice"], max_retries=0
    )


def _effort_notes(exai: dict[str, Any]) -> list[dict[str, str]]:
    return [n for n in exai.get("notes") or [] if "effort" in n["param"]]


async def test_chat_completions_sends_the_level_as_it_came(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        answer = await client.chat.completions.create(
            model="glm-5.2", messages=ASK, reasoning_effort="xhigh"
        )
    assert last_sent(emulator)["reasoning_effort"] == "xhigh"
    assert _effort_notes((answer.model_extra or {})["exai"]) == []


async def test_responses_sends_reasoning_effort(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon, _openai(daemon) as client:
        answer = await client.responses.create(
            model="glm-5.2", input="think it over", store=False, reasoning={"effort": "low"}
        )
    assert last_sent(emulator)["reasoning_effort"] == "low"
    assert _effort_notes((answer.model_extra or {})["exai"]) == []


async def test_messages_sends_output_config_effort_and_the_thinking_switch(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon, _anthropic(daemon) as client:
        await client.messages.create(
            model="glm-5.2", max_tokens=256, messages=ASK,
            extra_body={"output_config": {"effort": "max"}},
        )  # fmt: skip
        leveled = last_sent(emulator)
        await client.messages.create(
            model="kimi-k2.6", max_tokens=256, messages=ASK,
            thinking={"type": "disabled"},
        )  # fmt: skip
        switched = last_sent(emulator)
    assert leveled["reasoning_effort"] == "max"
    assert switched["thinking"] == {"type": "disabled"} and "reasoning_effort" not in switched


async def test_a_model_with_only_a_switch_gets_it_and_the_core_says_so(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator) as daemon, _anthropic(daemon) as client:
        answer = await client.messages.create(
            model="kimi-k2.6", max_tokens=256, messages=ASK,
            extra_body={"output_config": {"effort": "high"}},
        )  # fmt: skip
    sent = last_sent(emulator)
    assert "reasoning_effort" not in sent and sent["thinking"] == {"type": "enabled"}
    (note,) = _effort_notes((answer.model_extra or {})["exai"])
    assert note["param"] == "reasoning_effort"  # the core's note, not the face's
