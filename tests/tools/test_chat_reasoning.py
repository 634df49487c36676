"""Stored reasoning going back to the vendors that want it, through a real daemon,
real SDKs and the provider emulator (which refuses, as Moonshot does, a thinking
request whose assistant tool-call message lacks ``reasoning_content``).

exai's own tool-using turn is Kimi's ``$web_search`` round trip; each test runs
a first turn, then a later turn on the same thread, and reads what was sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import emulated_providers, make_settings, running_daemon


@pytest.fixture
def chat_settings(tmp_path, emulator):
    def build(**overrides):
        return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})

    return build


async def two_turns(settings: Any, client_factory: Any, first: dict[str, Any],
                    second: dict[str, Any]) -> tuple[Any, Any]:  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        one = await client.call("chat", {"prompt": "what changed in python 3.14?", **first})
        assert one.error is None, one.error
        cid = one.metadata.continuation_id
        two = await client.call("chat", {"prompt": "and in 3.15?", "continuation_id": cid,
                                         **second})  # fmt: skip
        assert two.error is None, two.error
    return one, two


def assistants(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["body"]["messages"] if m["role"] == "assistant"]


async def test_a_kimi_search_turn_is_answered_without_thinking_and_left_out_later(
    chat_settings, emulator, client_factory
) -> None:
    # Moonshot's $web_search needs thinking off, so K2.6 searches without it and the
    # search round is stored without reasoning; a later thinking request would be
    # refused with that round in it, so the round is left out of it.
    one, _ = await two_turns(chat_settings(), client_factory,
                             {"model": "kimi-k2.6", "use_websearch": True},
                             {"model": "kimi-k2.6"})  # fmt: skip

    searching, answering, later = (r["body"] for r in emulator.requests_for("kimi"))
    assert searching["thinking"] == answering["thinking"] == {"type": "disabled"}
    assert searching["tools"][0]["function"]["name"] == "$web_search"
    notes = one.metadata.model_extra["notes"]
    assert any(n["param"] == "thinking" and "web search needs thinking off" in n["message"]
               for n in notes)  # fmt: skip
    assert "thinking" not in later and later["model"] == "kimi-k2.6"
    assert [m["role"] for m in later["messages"]] == ["system", "user", "assistant", "user"]
    assert not any(m.get("tool_calls") for m in later["messages"])


async def test_preserved_thinking_sends_every_answers_reasoning_back(
    chat_settings, emulator, client_factory
) -> None:
    # K2.7 Code wants the reasoning of every earlier assistant message back, as it was.
    one, _ = await two_turns(chat_settings(), client_factory, {"model": "kimi-k2.7-code"},
                             {"model": "kimi-k2.7-code"})  # fmt: skip

    later = emulator.requests_for("kimi")[-1]["body"]
    (plain,) = assistants({"body": later})
    assert plain["reasoning_content"] == one.metadata.model_extra["reasoning"]
    assert plain["content"] == one.outputs[0].text


async def test_switching_to_thinking_off_or_to_glm_strips_what_they_do_not_take(
    chat_settings, emulator, client_factory
) -> None:
    settings = chat_settings()
    turn = {"model": "kimi-k2.6", "use_websearch": True}
    await two_turns(settings, client_factory, turn, {"model": "kimi-k2.6", "thinking_mode": "off"})
    off = emulator.requests_for("kimi")[-1]["body"]
    assert off["thinking"] == {"type": "disabled"}
    assert any(m.get("tool_calls") for m in off["messages"])  # Moonshot's own round stays
    assert not any("reasoning_content" in m for m in off["messages"])

    emulator.reset()
    await two_turns(settings, client_factory, turn, {"model": "glm-5.1"})
    glm = emulator.requests_for("glm")[-1]["body"]
    # Z.ai has no builtin_function tools: Moonshot's search round is not sent to it.
    assert [m["role"] for m in glm["messages"]] == ["system", "user", "assistant", "user"]
    assert not any("reasoning_content" in m or m.get("tool_calls") for m in glm["messages"])


@pytest.mark.parametrize("model", ["glm-5.1", "kimi-k2.6"])
async def test_a_plain_thinking_turn_keeps_its_reasoning_out_of_the_next_request(
    chat_settings, emulator, client_factory, model
) -> None:
    # Moonshot caches a prefix only when the earlier prompt was over 256 tokens.
    long = {"prompt": "what changed in python 3.14? " + "Consider every module. " * 100}
    one, two = await two_turns(chat_settings(), client_factory, {"model": model, **long},
                               {"model": model})  # fmt: skip

    assert one.metadata.model_extra["reasoning"]  # the model thought, and said so
    vendor = one.metadata.provider
    later = emulator.requests_for(vendor)[-1]
    (plain,) = assistants(later)
    assert plain == {"role": "assistant", "content": one.outputs[0].text}
    assert two.metadata.model_extra["cache_hit"] is True


async def test_listmodels_shows_current_models_with_prices_and_no_retired_ones(
    chat_settings, client_factory
) -> None:
    async with running_daemon(chat_settings()) as daemon:
        client = await client_factory(daemon)
        listed = await client.call("listmodels", {})
        retired = await client.call("chat", {"prompt": "hi", "model": "kimi-k2-0905-preview"})
    models = {m["name"]: m for m in listed.metadata.model_extra["models"]}
    assert {"kimi-k3", "kimi-k2.7-code", "kimi-k2.7-code-highspeed", "kimi-k2.6", "glm-5.3",
            "glm-5.2", "glm-5.1", "glm-5", "glm-5-turbo", "glm-4.7", "glm-4.7-flash",
            "glm-5v-turbo"} <= set(models)  # fmt: skip
    assert not {"kimi-k2-0905-preview", "kimi-k2-thinking", "kimi-k2.5",
                "moonshot-v1-8k"} & set(models)  # fmt: skip
    assert models["kimi-k3"]["reasoning_efforts"] == ["low", "high", "max"]
    assert models["kimi-k2.7-code"]["preserved_thinking"] is True
    assert models["kimi-k2.6"]["price"]["web_search_call"] == 0.005
    assert models["glm-5"]["price"] == {"currency": "USD", "input": 1.0, "cached_input": 0.2,
                                        "output": 3.2, "per": "1M tokens"}  # fmt: skip
    text = listed.outputs[0].text
    assert "kimi-k2.6  provider=kimi  configured=yes  context=262144  " \
           "price=0.95/0.16/4 USD per 1M tokens (input/cached/output)" in text  # fmt: skip
    assert "glm-4.5-air" in text and "price=unpriced" in text
    assert retired.error is not None and retired.error.code == "VALIDATION_ERROR"
    assert retired.error.message == "kimi-k2-0905-preview was retired by Moonshot; use kimi-k2.6"
