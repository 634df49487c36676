"""The caller's tool and sampling parameters through the registry and the real SDKs:
each one either reaches the emulated vendor (the recorded request shows it),
is adapted with a note, or is refused naming the parameter before anything is sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ExaiError, ValidationError_
from exai.providers import ChatRequest, ProviderRegistry
from exai.providers.kimi import KimiProvider
from exai.settings import Settings

from .helpers import READ, user

NAMED = {"type": "function", "function": {"name": "read_file"}}
BOTH = {"kimi_api_key": "sk-kimi", "glm_api_key": "glm-key"}


@pytest.fixture
async def registry(make_settings: Callable[..., Settings]) -> AsyncIterator[ProviderRegistry]:
    built = ProviderRegistry.from_settings(make_settings(**BOTH))
    yield built
    await built.aclose()


async def ask(registry: ProviderRegistry, model: str, **kw: Any) -> Any:
    kw.setdefault("messages", user("read the readme"))
    info = registry.resolve(model)
    request = ChatRequest(model=info.model_id, client_history=True, owner="alice", **kw)
    return await registry.complete(request, info)


def refused(excinfo: pytest.ExceptionInfo[ExaiError], param: str) -> bool:
    return isinstance(excinfo.value, ValidationError_) and excinfo.value.details == {"param": param}


# --- tool_choice ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "thinking", "choice"),
    [
        ("kimi-k2.6", False, "required"),
        ("kimi-k2.6", False, NAMED),
        ("kimi-k2.6", False, "none"),
        ("kimi-k2.6", None, "auto"),
        ("kimi-k2.6", None, "none"),
        ("kimi-k3", None, "required"),  # K3 takes a forced choice while it reasons
        ("kimi-k3", None, NAMED),
        ("glm-5.1", None, "auto"),
    ],
)
async def test_tool_choices_the_vendor_takes_are_sent(
    registry: ProviderRegistry, emulator: EmulatorServer, model: str, thinking: Any, choice: Any
) -> None:
    response = await ask(registry, model, tools=[READ], tool_choice=choice, thinking=thinking)

    (sent,) = emulator.requests
    assert sent["body"]["tool_choice"] == choice and sent["body"]["tools"] == [READ]
    assert not [n for n in response.notes if n["param"] in ("tool_choice", "thinking")]
    if choice in ("required", NAMED):  # the emulated model obeys a forced choice
        assert response.finish_reason == "tool_calls"
        assert response.tool_calls[0]["function"]["name"] == "read_file"


async def test_a_forced_choice_turns_thinking_off_on_a_switchable_kimi(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    response = await ask(registry, "kimi-k2.6", tools=[READ], tool_choice="required")

    body = emulator.requests[0]["body"]
    assert body["tool_choice"] == "required" and body["thinking"] == {"type": "disabled"}
    assert response.finish_reason == "tool_calls"
    (note,) = response.notes
    assert note["param"] == "thinking" and "forced tool_choice" in note["message"]


@pytest.mark.parametrize(
    ("model", "thinking", "choice"),
    [
        ("kimi-k2.6", True, "required"),
        ("kimi-k2.7-code", None, NAMED),
        ("glm-5.1", None, "required"),
        ("glm-4.6", False, NAMED),
    ],
)
async def test_a_forced_choice_the_model_cannot_take_is_refused_by_name(
    registry: ProviderRegistry, emulator: EmulatorServer, model: str, thinking: Any, choice: Any
) -> None:
    with pytest.raises(ValidationError_) as excinfo:
        await ask(registry, model, tools=[READ], tool_choice=choice, thinking=thinking)

    assert refused(excinfo, "tool_choice") and "tool_choice" in excinfo.value.message
    assert emulator.requests == []


async def test_none_on_z_ai_is_served_by_sending_no_tools(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    response = await ask(registry, "glm-5.1", tools=[READ], tool_choice="none")

    body = emulator.requests[0]["body"]
    assert "tools" not in body and "tool_choice" not in body
    assert [n["param"] for n in response.notes] == ["tool_choice"]
    assert response.tool_calls == [] and response.finish_reason == "stop"


async def test_a_named_choice_must_name_an_offered_tool(registry: ProviderRegistry) -> None:
    other = {"type": "function", "function": {"name": "write_file"}}
    with pytest.raises(ValidationError_) as excinfo:
        await ask(registry, "kimi-k3", tools=[READ], tool_choice=other)
    assert refused(excinfo, "tool_choice")


async def test_the_emulated_vendors_refuse_what_they_document(
    kimi: KimiProvider, emulator: EmulatorServer
) -> None:
    """Sent past exai's checks, straight through the plugin: the vendor's own refusal."""
    request = ChatRequest(
        model="kimi-k2.6", messages=user("x"), tools=[READ], tool_choice="required"
    )
    with pytest.raises(ExaiError, match="tool_choice 'required' is incompatible with thinking"):
        await kimi.complete(request)
    orphan = [*user("x"), {"role": "tool", "tool_call_id": "call_nobody", "content": "42"}]
    with pytest.raises(ExaiError, match="call_nobody"):
        await kimi.complete(
            ChatRequest(model="kimi-k2.6", thinking=False, messages=orphan, tools=[READ])
        )


# --- sampling parameters ----------------------------------------------------------------


async def test_stop_reaches_each_vendor_and_ends_the_reply(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    kimi = await ask(registry, "kimi-k2.6", stop=["(saw", "never"])
    glm = await ask(registry, "glm-5.1", stop=["(saw"])

    assert [r["body"]["stop"] for r in emulator.requests] == [["(saw", "never"], ["(saw"]]
    assert kimi.text == glm.text == "emulated reply #1 to: read the readme "


@pytest.mark.parametrize(
    ("model", "stop"),
    [("glm-5.1", ["a", "b"]), ("kimi-k2.6", list("abcdef")), ("kimi-k2.6", ["x" * 33])],
)
async def test_stop_lists_the_vendor_refuses_are_refused_by_name(
    registry: ProviderRegistry, emulator: EmulatorServer, model: str, stop: list[str]
) -> None:
    with pytest.raises(ValidationError_) as excinfo:
        await ask(registry, model, stop=stop)
    assert refused(excinfo, "stop") and emulator.requests == []


async def test_top_p_is_sent_where_it_can_be_set(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    await ask(registry, "glm-4.6", top_p=0.5)
    await ask(registry, "glm-5.1", top_p=1.0)  # the SDK would have sent 0.99
    await ask(registry, "kimi-k2.6", top_p=0.95)  # what k2.6 uses anyway
    await ask(registry, "kimi-k3", top_p=0.95)  # and K3

    glm46, glm, k26, k3 = (r["body"] for r in emulator.requests)
    assert glm46["top_p"] == 0.5 and glm["top_p"] == 1.0
    assert "top_p" not in k26 and "top_p" not in k3


async def test_a_top_p_the_model_fixes_otherwise_is_refused_by_name(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    with pytest.raises(ValidationError_) as excinfo:
        await ask(registry, "kimi-k2.6", top_p=0.5)
    assert refused(excinfo, "top_p") and "0.95" in excinfo.value.message
    assert emulator.requests == []


async def test_seed_goes_to_z_ai_and_is_refused_for_moonshot(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    await ask(registry, "glm-5.1", seed=7)
    assert emulator.requests[0]["body"]["seed"] == 7
    with pytest.raises(ValidationError_) as excinfo:
        await ask(registry, "kimi-k2.6", seed=7)
    assert refused(excinfo, "seed") and len(emulator.requests) == 1


async def test_json_mode_reaches_both_vendors(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    formats = {"type": "json_object"}
    kimi = await ask(registry, "kimi-k2.6", response_format=formats)
    glm = await ask(registry, "glm-5.1", response_format=formats)

    assert [r["body"]["response_format"] for r in emulator.requests] == [formats, formats]
    assert json.loads(kimi.text)["reply"] and json.loads(glm.text)["reply"]


@pytest.mark.parametrize("model", ["kimi-k2.6", "glm-5.1"])
async def test_a_json_schema_neither_vendor_documents_is_refused_by_name(
    registry: ProviderRegistry, emulator: EmulatorServer, model: str
) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    with pytest.raises(ValidationError_) as excinfo:
        await ask(registry, model, response_format=schema)
    assert refused(excinfo, "response_format") and emulator.requests == []


async def test_what_the_model_sets_itself_is_reported(
    registry: ProviderRegistry, emulator: EmulatorServer
) -> None:
    response = await ask(registry, "kimi-k2.6", temperature=0.2, max_output_tokens=10**6)

    body = emulator.requests[0]["body"]
    assert "temperature" not in body and body["max_completion_tokens"] == 32768
    assert "max_tokens" not in body  # Moonshot deprecates it
    assert {n["param"] for n in response.notes} == {"temperature", "max_tokens"}
