"""Moonshot's and Z.ai's documented rules, kept through exai's real clients.

Each test sends through KimiProvider / GLMProvider (the real ``openai`` and
``zai-sdk`` clients) or a ProviderRegistry, to the provider emulator, which
refuses what the vendors refuse (the rules of :data:`exai.emulators.contract.RULES`,
ids in brackets). A test passes when the emulator accepts what exai sends, or
exai refuses or adapts, with a note, what the vendor would refuse; the recorded
request bodies show what reached the vendor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ContextTooLongError, ProviderError, ValidationError_
from exai.providers import ChatRequest, ModelNeeds, ProviderRegistry
from exai.providers.base import ChatResponse, Delta
from exai.providers.glm import GLMProvider
from exai.providers.kimi import KimiProvider
from exai.providers.pricing import call_cost

from .helpers import READ, user

BOTH = {"kimi_api_key": "sk-kimi", "glm_api_key": "glm-key"}
MakeRegistry = Callable[..., ProviderRegistry]


def ask(text: str = "hello", **kw: Any) -> ChatRequest:
    kw.setdefault("messages", user(text))
    return ChatRequest(model="", **kw)


async def call(registry: ProviderRegistry, model: str, request: ChatRequest) -> ChatResponse:
    return await registry.complete(request, registry.resolve(model))


def bodies(emulator: EmulatorServer, vendor: str | None = None) -> list[dict[str, Any]]:
    requests = emulator.requests if vendor is None else emulator.requests_for(vendor)
    return [r["body"] for r in requests]


async def collect(stream: Any) -> list[Delta]:
    return [delta async for delta in stream]


# --- Kimi K3: reasoning_effort, never a thinking switch [K-1] -------------------------


async def test_k3_gets_reasoning_effort_and_no_thinking_switch(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH)
    response = await call(registry, "kimi-k3", ask("think hard", reasoning_effort="medium"))

    (body,) = bodies(emulator)
    assert body["model"] == "kimi-k3" and body["reasoning_effort"] == "high"
    assert "thinking" not in body and "temperature" not in body
    (note,) = response.notes
    assert note["param"] == "reasoning_effort"
    assert "'medium' was sent as 'high'" in note["message"] and "low, high, max" in note["message"]
    assert response.reasoning == "emulated reasoning about: think hard"  # accepted, reasoned


@pytest.mark.parametrize(
    ("model", "asked", "sent", "thinking", "noted"),
    [
        ("kimi-k3", "max", "max", None, False),
        ("kimi-k3", "none", "low", None, True),  # K3 always reasons: the least it takes
        ("kimi-k3", "xhigh", "max", None, True),
        ("glm-5.3", "none", "minimal", None, True),  # GLM-5.3 cannot stop thinking
        ("glm-5.3", "high", "high", None, False),
        ("glm-5.2", "none", "none", None, False),
        ("glm-5.1", "high", None, {"type": "enabled"}, True),  # only a switch [G-1]
        ("glm-5.1", "minimal", None, {"type": "disabled"}, True),
        ("kimi-k2.6", "none", None, {"type": "disabled"}, False),
        ("kimi-k2.6", "high", None, {"type": "enabled"}, True),
    ],
)
async def test_each_model_gets_the_effort_as_its_own_knob(
    make_registry: MakeRegistry,
    emulator: EmulatorServer,
    model: str,
    asked: str,
    sent: str | None,
    thinking: dict[str, str] | None,
    noted: bool,
) -> None:
    registry = make_registry(**BOTH)
    response = await call(registry, model, ask(reasoning_effort=asked))

    (body,) = bodies(emulator)  # the emulated vendor took it
    assert body.get("reasoning_effort") == sent and body.get("thinking") == thinking
    assert [n["param"] for n in response.notes] == (["reasoning_effort"] if noted else [])
    assert response.text.startswith("emulated reply #1")


# --- Kimi K2.7 Code: Preserved Thinking over a thread of tool rounds [K-9] -------------


def step(reasoning: str) -> dict[str, Any]:
    """A scripted K2.7 Code tool round for the first request of a turn (not for the
    request that returns the tool result)."""
    return {
        "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
        "reasoning": reasoning,
        "when": {"offers_tool": "read_file", "last_role": "user", "model": "kimi-k2.7-code"},
    }


@pytest.mark.parametrize("client_history", [True, False], ids=["client", "stored"])
async def test_k27_code_gets_every_earlier_reasoning_back_over_three_turns(
    make_registry: MakeRegistry, emulator: EmulatorServer, client_history: bool
) -> None:
    """A thread opened on K2.6 without thinking, then three K2.7 Code turns, two with a
    tool round. With the caller's own history (an OpenAI client drops reasoning; exai
    restores the tool rounds' from its cache) and with exai's stored history (the
    messages as the exchange produced them, reasoning kept): every earlier assistant
    message reaches Moonshot with reasoning_content, its own where exai has it, ""
    where it has none, and Moonshot accepts each request."""
    registry = make_registry(**BOTH)
    rounds = ["first I read the README", "now the README again"]
    emulator.script(step(rounds[0]), step(rounds[1]))
    history: list[dict[str, Any]] = []
    expected: list[str] = []  # each assistant message's reasoning_content, as sent

    def request(**kw: Any) -> ChatRequest:
        return ChatRequest(model="", messages=list(history), tools=[READ],
                           client_history=client_history, owner="alice", **kw)  # fmt: skip

    def keep(response: ChatResponse) -> None:
        """The answer as the next request's history holds it."""
        (answer,) = response.messages
        assert answer.get("reasoning_content") == response.reasoning  # the exchange keeps it
        if client_history:
            answer = {"role": "assistant", "content": response.text}
        history.append(answer)
        expected.append("" if client_history else response.reasoning or "")

    history.append({"role": "user", "content": "question 0"})
    opening = await call(registry, "kimi-k2.6", request(thinking=False))
    assert opening.reasoning is None
    keep(opening)

    for turn in (1, 2, 3):
        history.append({"role": "user", "content": f"question {turn}"})
        response = await call(registry, "kimi-k2.7-code", request())
        if turn < 3:
            assert response.finish_reason == "tool_calls"
            (round_,) = response.messages
            assert round_["reasoning_content"] == rounds[turn - 1]
            if client_history:  # an OpenAI client gives the call back without reasoning
                round_ = {"role": "assistant", "content": None,
                          "tool_calls": response.tool_calls}  # fmt: skip
            call_id = response.tool_calls[0]["id"]
            history += [round_, {"role": "tool", "tool_call_id": call_id, "content": "# exai"}]
            expected.append(rounds[turn - 1])
            response = await call(registry, "kimi-k2.7-code", request())
        assert response.finish_reason == "stop" and response.notes == []
        assert response.text == (
            f"emulated reply #{turn + 1} to: question {turn} (saw {len(history)} messages)"
        )
        assert response.reasoning == f"emulated reasoning about: question {turn}"
        keep(response)

    sent = bodies(emulator)
    assert len(sent) == 6 and all("thinking" not in body for body in sent[1:])
    final = sent[-1]["messages"]

    def bare(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]

    assert bare(final) == bare(history[:-1])  # every message reached Moonshot
    assert [m["reasoning_content"] for m in final if m["role"] == "assistant"] == expected[:-1]
    assert "" in expected  # the opening answer had none
    for body in sent[1:]:  # every K2.7 Code request: no assistant message without the field
        assistants = [m for m in body["messages"] if m["role"] == "assistant"]
        assert assistants and all(isinstance(m["reasoning_content"], str) for m in assistants)


# --- tool schemas: typed for Moonshot, untouched for Z.ai [K-6] ------------------------

ENUM_ONLY = {
    "type": "function",
    "function": {
        "name": "set_mode",
        "description": "Switch the mode",
        "parameters": {
            "type": "object",
            "properties": {
                "mode": {"enum": ["fast", "slow"], "description": "how"},
                "level": {"enum": [1, 2, 3]},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                "where": {"$ref": "#/$defs/Place"},
            },
            "required": ["mode"],
            "$defs": {"Place": {"enum": ["here", "there"]}},
        },
    },
}


async def test_an_enum_only_schema_is_typed_for_moonshot_and_untouched_for_z_ai(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    original = json.loads(json.dumps(ENUM_ONLY))
    async with httpx.AsyncClient(base_url=emulator.base_url_kimi) as raw:
        refused = await raw.post("/chat/completions", json={
            "model": "kimi-k2.6", "messages": user("x"), "tools": [ENUM_ONLY],
            "thinking": {"type": "disabled"}})  # fmt: skip
    assert refused.status_code == 400  # what Moonshot says to the schema as the caller wrote it
    assert "At path 'properties.mode': type is not defined" in refused.json()["error"]["message"]

    registry = make_registry(**BOTH)
    for model in ("kimi-k2.6", "glm-5.1"):
        response = await call(registry, model, ask("switch", tools=[ENUM_ONLY]))
        assert response.finish_reason == "stop"  # both vendors took the request

    kimi, glm = (r["body"] for r in emulator.requests[1:])
    properties = kimi["tools"][0]["function"]["parameters"]["properties"]
    assert properties["mode"] == {"enum": ["fast", "slow"], "description": "how", "type": "string"}
    assert properties["level"] == {"enum": [1, 2, 3], "type": "integer"}
    assert properties["tags"]["items"] == {"enum": ["a", "b"], "type": "string"}
    assert properties["where"] == {"enum": ["here", "there"], "type": "string"}  # inlined
    assert "$defs" not in kimi["tools"][0]["function"]["parameters"]
    assert kimi["tools"][0]["function"]["parameters"]["required"] == ["mode"]
    assert glm["tools"] == [ENUM_ONLY]  # Z.ai takes the schema as written
    assert original == ENUM_ONLY  # the caller's schema is not modified


# --- Moonshot's $web_search needs thinking off [K-7] ---------------------------------


async def test_k26_searches_with_thinking_off_and_says_so(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH)
    response = await call(registry, "kimi-k2.6", ask("news today", web_search=True))

    first, second = bodies(emulator)
    assert first["tools"] == [{"type": "builtin_function", "function": {"name": "$web_search"}}]
    assert first["thinking"] == second["thinking"] == {"type": "disabled"}
    (note,) = response.notes
    assert note["param"] == "thinking" and "web search needs thinking off" in note["message"]
    assert response.text.startswith("emulated reply #1 to: news today")
    assert response.reasoning is None and response.usage.web_searches == 1


async def test_k26_search_with_thinking_asked_for_is_refused_by_name(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_) as caught:
        await call(registry, "kimi-k2.6", ask("news", web_search=True, thinking=True))
    assert caught.value.details == {"param": "web_search"}
    assert "thinking was asked for" in caught.value.message
    assert emulator.requests == []


async def test_k26_search_with_an_effort_that_asks_for_thinking_is_refused_by_name(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    # K2.6 has no effort levels: "high" asks for thinking, which the search cannot have.
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_) as caught:
        await call(registry, "kimi-k2.6", ask("news", web_search=True, reasoning_effort="high"))
    assert caught.value.details == {"param": "web_search"}
    assert emulator.requests == []


async def test_a_model_without_search_called_directly_is_refused_not_searched_silently(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_) as caught:
        await call(registry, "kimi-k3", ask("news", web_search=True))
    assert caught.value.details == {"param": "web_search"}
    assert "kimi-k3 cannot search the web" in caught.value.message
    assert emulator.requests == []


async def test_k3_cannot_search(
    make_registry: MakeRegistry, emulator: EmulatorServer, tmp_path: Path
) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_, match="'kimi-k3' has no web search") as caught:
        registry.resolve("kimi-k3", ModelNeeds(web_search=True))
    assert "kimi-k2.6" in caught.value.message  # a configured model that can

    # Even a models file claiming K3 can search does not get $web_search sent to it.
    claims = tmp_path / "models.toml"
    claims.write_text('[models."kimi-k3"]\nweb_search = true\n')
    believing = make_registry(**BOTH, models_file=claims)
    with pytest.raises(ValidationError_) as refused:
        await call(believing, "kimi-k3", ask("news", web_search=True))
    assert refused.value.details == {"param": "web_search"}
    assert "kimi-k3" in refused.value.message and "always thinks" in refused.value.message
    assert emulator.requests == []


# --- Z.ai's failures as finish reasons [G-5] -----------------------------------------


def glm_request(text: str = "hello") -> ChatRequest:
    return ChatRequest(model="glm-5.1", messages=user(text))


async def test_glm_sensitive_is_a_content_filter_with_a_note(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"finish_reason": "sensitive"}, {"finish_reason": "sensitive"})
    whole = await glm.complete(glm_request())
    deltas = await collect(glm.stream(glm_request()))
    streamed = deltas[-1].response

    assert streamed is not None
    for response in (whole, streamed):
        assert response.finish_reason == "content_filter" and response.text == ""
        (note,) = response.notes
        assert note["param"] == "answer" and "content filter" in note["message"]
        assert "'sensitive'" in note["message"]
    assert not [d for d in deltas if d.kind == "text"]
    assert len(emulator.requests) == 2  # not retried


async def test_glm_network_error_is_retried_when_whole(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"finish_reason": "network_error"})  # then the emulator's own reply
    response = await glm.complete(glm_request())

    assert response.text == "emulated reply #1 to: hello (saw 1 messages)"
    assert response.finish_reason == "stop" and response.retries == 1
    assert len(emulator.requests) == 2


async def test_glm_network_error_ends_a_stream_with_an_error(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"finish_reason": "network_error"})
    seen: list[Delta] = []
    with pytest.raises(ProviderError) as caught:
        async for delta in glm.stream(glm_request("a longer question to cut")):
            seen.append(delta)

    assert caught.value.retryable is True
    assert caught.value.details["kind"] == "stream"
    assert caught.value.details["finish_reason"] == "network_error"
    assert "text" in {d.kind for d in seen}  # the answer was shown in part
    assert "done" not in {d.kind for d in seen}
    assert len(emulator.requests) == 1  # what was shown cannot be taken back: no retry


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_glm_context_overflow_is_context_too_long(
    glm: GLMProvider, emulator: EmulatorServer, streamed: bool
) -> None:
    emulator.configure(max_prompt_tokens=3)
    request = glm_request("a prompt longer than three tokens")
    with pytest.raises(ContextTooLongError, match="model_context_window_exceeded") as caught:
        if streamed:
            await collect(glm.stream(request))
        else:
            await glm.complete(request)
    assert caught.value.details["kind"] == "context_length"
    assert len(emulator.requests) == 1


# --- Moonshot's output cap is max_completion_tokens [K-5] -----------------------------


@pytest.mark.parametrize(
    ("model", "thinking"), [("kimi-k2.6", False), ("kimi-k2.6", None), ("kimi-k3", None)]
)
async def test_a_callers_cap_bounds_a_kimi_reply(
    make_registry: MakeRegistry, emulator: EmulatorServer, model: str, thinking: bool | None
) -> None:
    registry = make_registry(**BOTH)
    request = ask("a long question", max_output_tokens=3, continue_cut=False, thinking=thinking)
    response = await call(registry, model, request)

    (body,) = bodies(emulator)
    assert body["max_completion_tokens"] == 3 and "max_tokens" not in body
    assert response.finish_reason == "length" and response.text == "emulated reply #1 "


# --- retired models and the vendor's 404 [K-2] ----------------------------------------


async def test_a_retired_id_is_refused_with_its_successor(
    make_registry: MakeRegistry, emulator: EmulatorServer, kimi: KimiProvider
) -> None:
    registry = make_registry(**BOTH)
    for asked, successor in (("kimi-k2-thinking", "kimi-k2.6"), ("kimi-latest", "kimi-k3"),
                             ("moonshot-v1-128k", "kimi-k2.6")):  # fmt: skip
        with pytest.raises(ValidationError_) as caught:
            registry.resolve(asked)
        assert caught.value.message == f"{asked} was retired by Moonshot; use {successor}"
        assert caught.value.details["successor"] == successor
    assert emulator.requests == []

    # What Moonshot itself says to the id, straight through the plugin.
    with pytest.raises(ProviderError) as vendor:
        await kimi.complete(ChatRequest(model="kimi-k2-thinking", messages=user("x")))
    assert vendor.value.details["kind"] == "not_found" and vendor.value.details["status"] == 404


REVIVED = """
[models."kimi-k2.5"]
retired = false
context_window = 262144
max_output_tokens = 32768
"""


async def test_a_vendor_404_for_a_catalogued_model_falls_back_with_a_note(
    make_registry: MakeRegistry, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """A models file still lists kimi-k2.5 as current; Moonshot answers 404."""
    models = tmp_path / "models.toml"
    models.write_text(REVIVED)
    registry = make_registry(**BOTH, models_file=models, fallback_models=["glm-5.1"],
                             provider_max_retries=3)  # fmt: skip
    response = await call(registry, "kimi-k2.5", ask("still there?"))

    assert response.model == "glm-5.1" and response.fallback_from == "kimi-k2.5"
    (note,) = response.notes
    assert note["param"] == "model"
    assert note["message"].startswith("kimi-k2.5 could not answer (PROVIDER_ERROR: ")
    assert "most likely retired it; use kimi-k3" in note["message"]
    assert note["message"].endswith(
        "glm-5.1 answered instead, at its own price (USD 1.4 in / 4.4 out per 1M tokens)"
    )
    assert [r["body"]["model"] for r in emulator.requests] == ["kimi-k2.5", "glm-5.1"]

    alone = make_registry(**BOTH, models_file=models)
    with pytest.raises(ProviderError) as caught:
        await call(alone, "kimi-k2.5", ask())
    assert caught.value.details["kind"] == "not_found"
    assert caught.value.details["successor"] == "kimi-k3"
    assert "use kimi-k3" in caught.value.message


# --- out of balance: another vendor answers, nothing is retried ------------------------


@pytest.mark.parametrize(
    ("vendor", "model", "fallback", "code"),
    [
        ("kimi", "kimi-k2.6", "glm-5.1", "exceeded_current_quota_error"),
        ("glm", "glm-5.1", "kimi-k2.6", "1113"),
    ],
)
async def test_a_balance_error_falls_back_to_the_other_vendor_unretried(
    make_registry: MakeRegistry,
    emulator: EmulatorServer,
    vendor: str,
    model: str,
    fallback: str,
    code: str,
) -> None:
    registry = make_registry(**BOTH, fallback_models=[fallback], provider_max_retries=3)
    emulator.script({"status": 429, "error": "balance"}, vendor=vendor)
    response = await call(registry, model, ask("pay me"))

    assert response.model == fallback and response.fallback_from == model
    (note,) = response.notes
    assert note["param"] == "model"
    assert note["message"].startswith(f"{model} could not answer (PROVIDER_ERROR: ")
    assert f"HTTP 429 {code}" in note["message"] and "balance" in note["message"]
    assert f"{fallback} answered instead, at its own price (USD " in note["message"]
    assert len(emulator.requests_for(vendor)) == 1
    assert len(emulator.requests) == 2


# --- GLM temperature as asked ---------------------------------------------------------


async def test_glm_temperature_reaches_z_ai_as_asked(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    """The zai-sdk would send 1.0 as 0.99 and 0.0 as 0.01 with do_sample false."""
    registry = make_registry(**BOTH)
    for temperature in (1.0, 0.0):
        response = await call(registry, "glm-5.1", ask(temperature=temperature))
        assert response.notes == []

    high, low = bodies(emulator)
    assert high["temperature"] == 1.0 and low["temperature"] == 0.0
    assert "do_sample" not in high and "do_sample" not in low


# --- web search fees -------------------------------------------------------------------


async def test_a_kimi_search_costs_its_fee(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    events: list[dict[str, Any]] = []
    registry = make_registry(**BOTH, emit=lambda kind, **fields: events.append(fields))
    info = registry.resolve("kimi-k2.6")
    response = await registry.complete(ask("news today", web_search=True), info)

    assert response.usage.web_searches == 1
    assert response.usage.as_dict()["web_searches"] == 1
    assert info.price is not None
    cost = call_cost(info.price, response.usage)
    assert cost.tools == Decimal("0.005") and cost.as_dict()["tools"] == 0.005
    assert events[-1]["cost"] == float(cost.total)  # the audit trail charges the fee
    assert [n["param"] for n in response.notes] == ["thinking"]  # no "unpriced fee" note


async def test_a_glm_search_says_its_fee_is_not_in_the_cost(
    make_registry: MakeRegistry, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH)
    info = registry.resolve("glm-5.1")
    response = await registry.complete(ask("news today", web_search=True), info)

    assert response.search_results and response.usage.web_searches == 1
    (note,) = response.notes
    assert note["param"] == "cost"
    assert "no confirmed fee" in note["message"] and "1 search fee(s)" in note["message"]
    assert info.price is not None and call_cost(info.price, response.usage).tools == 0
    assert len(emulator.requests) == 1


async def test_a_glm_tool_name_repeated_on_every_piece_is_read_once(
    glm: GLMProvider, emulator: EmulatorServer
) -> None:
    # Some GLM servers repeat function.name on every tool_stream piece (3p vllm#44098).
    emulator.configure(glm_tool_stream_repeat_name=True)
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": {"path": "a long path"}}]})
    request = ChatRequest(model="glm-5.1", messages=user("read"), tools=[READ], tool_stream=True)
    deltas = [d async for d in glm.stream(request)]

    assert emulator.requests[-1]["body"]["tool_stream"] is True
    (call,) = deltas[-1].response.tool_calls
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "a long path"}
