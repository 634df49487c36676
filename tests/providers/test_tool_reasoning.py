"""A thinking model's tool rounds in a caller's own history (stateless requests):
the reasoning goes back with the round although the client never sends it,
every message reaches the model, and what exai does not know is adapted or
refused, never dropped. Through the registry, the real SDKs and the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ValidationError_
from exai.providers import ChatRequest, ProviderRegistry
from exai.providers.tool_reasoning import ToolReasoning, round_digests
from exai.settings import Settings

from .helpers import READ

STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
    "reasoning": "I should read the README first",
    "when": {"offers_tool": "read_file"},
}


@pytest.fixture
async def make_registry(
    make_settings: Callable[..., Settings],
) -> AsyncIterator[Callable[..., ProviderRegistry]]:
    built: list[ProviderRegistry] = []

    def build(**overrides: Any) -> ProviderRegistry:
        values = {"kimi_api_key": "sk-kimi", "glm_api_key": "glm-key", **overrides}
        built.append(ProviderRegistry.from_settings(make_settings(**values)))
        return built[-1]

    yield build
    for registry in built:
        await registry.aclose()


async def ask(
    registry: ProviderRegistry,
    model: str,
    messages: list[dict[str, Any]],
    owner: str = "alice",
    **kw: Any,
) -> Any:
    info = registry.resolve(model)
    request = ChatRequest(
        model=info.model_id, messages=messages, tools=[READ], client_history=True, owner=owner, **kw
    )
    return await registry.complete(request, info)


def as_a_client_returns_it(question: str, response: Any, result: str) -> list[dict[str, Any]]:
    """The next request of an OpenAI client: the assistant turn as the SDK gives it
    (no reasoning_content), then the tool result."""
    call = response.tool_calls[0]
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": result},
    ]


async def test_kimi_gets_the_rounds_reasoning_back_and_every_message(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    registry = make_registry()
    emulator.script(STEP)
    first = await ask(registry, "kimi-k2.6", [{"role": "user", "content": "what is exai?"}])
    assert first.finish_reason == "tool_calls" and first.reasoning == STEP["reasoning"]
    history = as_a_client_returns_it("what is exai?", first, "# exai: a daemon")

    second = await ask(registry, "kimi-k2.6", history)

    sent = emulator.requests[-1]["body"]
    assert len(sent["messages"]) == len(history)
    assert sent["messages"][1]["reasoning_content"] == STEP["reasoning"]
    assert sent["messages"][1]["tool_calls"] == history[1]["tool_calls"]
    assert sent["messages"][2] == history[2]
    assert "thinking" not in sent  # still thinking: nothing was adapted
    assert second.notes == [] and second.finish_reason == "stop"
    assert second.text.startswith("emulated reply #1 to: what is exai?")


async def test_a_round_this_daemon_does_not_know_turns_thinking_off(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    emulator.script(STEP)
    first = await ask(make_registry(), "kimi-k2.6", [{"role": "user", "content": "q"}])
    history = as_a_client_returns_it("q", first, "result")

    # Another daemon (a fresh registry) gets the next request.
    second = await ask(make_registry(), "kimi-k2.6", history)

    sent = emulator.requests[-1]["body"]
    assert sent["messages"] == history  # every message, none left out
    assert sent["thinking"] == {"type": "disabled"}
    (note,) = second.notes
    assert note["param"] == "thinking" and "messages[1]" in note["message"]
    assert "not known" in note["message"]


async def test_an_unknown_round_is_refused_when_thinking_cannot_be_turned_off(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    made_up = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "functions.read_file:0",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.read_file:0", "content": "r"},
    ]
    registry = make_registry()
    for model, thinking in (("kimi-k2.7-code", None), ("kimi-k3", None), ("kimi-k2.6", True)):
        with pytest.raises(ValidationError_) as excinfo:
            await ask(registry, model, made_up, thinking=thinking)
        assert excinfo.value.details is not None
        assert excinfo.value.details["param"] == "messages[1]"
    assert emulator.requests == []


async def test_another_principals_round_does_not_get_its_reasoning(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    registry = make_registry()
    emulator.script(STEP)
    first = await ask(registry, "kimi-k2.6", [{"role": "user", "content": "q"}], owner="alice")
    history = as_a_client_returns_it("q", first, "result")

    second = await ask(registry, "kimi-k2.6", history, owner="bob")

    sent = emulator.requests[-1]["body"]
    assert STEP["reasoning"] not in str(sent)
    assert sent["thinking"] == {"type": "disabled"} and sent["messages"] == history
    assert second.notes[0]["param"] == "thinking"


async def test_the_same_call_in_another_conversation_does_not_get_its_reasoning(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    """Moonshot numbers calls per conversation, so ids repeat across conversations."""
    registry = make_registry()
    emulator.script(STEP)
    first = await ask(registry, "kimi-k2.6", [{"role": "user", "content": "first task"}])
    other = as_a_client_returns_it("another task", first, "result")
    assert other[1]["tool_calls"][0]["id"] == "functions.read_file:0"

    await ask(registry, "kimi-k2.6", other)

    sent = emulator.requests[-1]["body"]
    assert "reasoning_content" not in sent["messages"][1]
    assert sent["thinking"] == {"type": "disabled"}


async def test_a_round_made_without_thinking_is_known_to_have_no_reasoning(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    registry = make_registry()
    emulator.script({**STEP, "reasoning": None})
    first = await ask(registry, "kimi-k2.6", [{"role": "user", "content": "q"}], thinking=False)
    history = as_a_client_returns_it("q", first, "result")

    second = await ask(registry, "kimi-k2.6", history)

    assert emulator.requests[-1]["body"]["thinking"] == {"type": "disabled"}
    assert "without thinking" in second.notes[0]["message"]


async def test_z_ai_gets_known_reasoning_back_and_unknown_rounds_are_reported(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    registry = make_registry()
    emulator.script(STEP)
    first = await ask(registry, "glm-5.1", [{"role": "user", "content": "q"}])
    history = as_a_client_returns_it("q", first, "result")

    known = await ask(registry, "glm-5.1", history)
    unknown = await ask(make_registry(), "glm-5.1", history)

    with_it, without = (r["body"]["messages"] for r in emulator.requests[1:])
    assert with_it[1]["reasoning_content"] == STEP["reasoning"] and known.notes == []
    assert without == history  # Z.ai takes the round without it; every message sent
    assert unknown.notes[0]["param"] == "messages[1]"


async def test_stored_threads_keep_their_own_rule(
    emulator: EmulatorServer, make_registry: Any
) -> None:
    """exai's stored threads (not client history) still leave out a round made
    without thinking, as exai.providers.reasoning says."""
    registry = make_registry()
    stored = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "user", "content": "next"},
    ]
    info = registry.resolve("kimi-k2.6")
    await registry.complete(ChatRequest(model=info.model_id, messages=stored), info)

    assert [m["role"] for m in emulator.requests[-1]["body"]["messages"]] == ["user", "user"]


async def test_fallback_keeps_the_tools_and_parameters(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    registry = make_registry(fallback_models=["glm-5.1"])
    emulator.script({"status": 503}, vendor="kimi")
    emulator.script({**STEP, "vendor": "glm"})

    response = await ask(
        registry, "kimi-k2.6", [{"role": "user", "content": "q"}], tool_choice="auto", stop=["END"]
    )

    assert response.fallback_from == "kimi-k2.6" and response.model == "glm-5.1"
    assert response.tool_calls[0]["function"]["name"] == "read_file"
    kimi, glm = (r["body"] for r in emulator.requests)
    for body in (kimi, glm):
        assert body["tools"] == [READ] and body["tool_choice"] == "auto"
        assert body["stop"] == ["END"]


async def test_a_fallback_that_cannot_take_the_parameters_is_skipped(
    make_registry: Callable[..., ProviderRegistry], emulator: EmulatorServer
) -> None:
    registry = make_registry(
        fallback_models=["kimi-k2.6", "kimi-k3", "llama3.1:8b"],
        openai_compat_base_url=emulator.base_url_openai,
        openai_compat_models=["llama3.1:8b"],
    )
    await registry.refresh_models()
    emulator.script({"status": 503}, vendor="glm")

    # Every Kimi model fixes top_p at 0.95; the local model takes 0.5 and answers.
    response = await ask(registry, "glm-5.1", [{"role": "user", "content": "q"}], top_p=0.5)

    assert response.model == "llama3.1:8b" and response.fallback_from == "glm-5.1"
    assert response.provider == "openai_compat"
    assert [(r["path"], r["body"]["model"]) for r in emulator.requests] == [
        ("/api/paas/v4/chat/completions", "glm-5.1"),
        ("/v1/chat/completions", "llama3.1:8b"),
    ]  # nothing reached Moonshot
    assert emulator.requests[-1]["body"]["top_p"] == 0.5


# --- the cache itself --------------------------------------------------------------------


def turn(reasoning: str, call_id: str = "c1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "reasoning_content": reasoning,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def test_client_formatting_does_not_change_the_key() -> None:
    cache = ToolReasoning(max_bytes=10_000, ttl_s=60)
    cache.remember(
        "alice", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], turn("why")
    )
    returned = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": turn("")["tool_calls"],
    }

    out, unknown = cache.restore("alice", [{"role": "user", "content": "hi"}, returned])

    assert unknown == [] and out[1]["reasoning_content"] == "why"
    assert "reasoning_content" not in returned  # the input is left alone


def test_keys_differ_by_owner_and_by_conversation() -> None:
    conversation = [{"role": "user", "content": "hi"}, turn("")]
    assert round_digests("alice", conversation) != round_digests("bob", conversation)
    other = [{"role": "user", "content": "ho"}, turn("")]
    assert round_digests("alice", conversation) != round_digests("alice", other)


def test_entries_expire() -> None:
    now = [0.0]
    cache = ToolReasoning(max_bytes=10_000, ttl_s=60, clock=lambda: now[0])
    cache.remember("alice", [], turn("why"))
    now[0] = 59.0
    assert cache.restore("alice", [turn("")])[1] == []
    now[0] = 120.0
    assert cache.restore("alice", [turn("")])[1] == [0] and len(cache) == 0


def test_the_oldest_entries_go_first_when_full() -> None:
    cache = ToolReasoning(max_bytes=3 * (300 + 100), ttl_s=60)
    for n in range(4):
        cache.remember("alice", [], turn("x" * 100, call_id=f"c{n}"))
    assert len(cache) == 3 and cache.bytes_held <= cache.max_bytes
    assert cache.restore("alice", [turn("", call_id="c0")])[1] == [0]
    assert cache.restore("alice", [turn("", call_id="c3")])[1] == []
