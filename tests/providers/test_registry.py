"""The registry: describing, resolving and routing models, fallback, limits, audit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import (
    ContextTooLongError,
    OverCapacityError,
    ProviderError,
    RateLimitedError,
    ValidationError_,
)
from exai.providers import ChatRequest, ModelNeeds, ProviderRegistry
from exai.settings import Settings, SettingsError

from .helpers import user

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def events() -> Events:
    return []


@pytest.fixture
async def make_registry(
    make_settings: Callable[..., Settings], events: Events
) -> AsyncIterator[Callable[..., ProviderRegistry]]:
    built: list[ProviderRegistry] = []

    def build(**overrides: Any) -> ProviderRegistry:
        registry = ProviderRegistry.from_settings(
            make_settings(**overrides), emit=lambda kind, **f: events.append((kind, f))
        )
        built.append(registry)
        return registry

    yield build
    for registry in built:
        await registry.aclose()


BOTH = {"kimi_api_key": "sk-kimi-secret", "glm_api_key": "glm-secret"}


def ask(text: str = "hi", **kw: Any) -> ChatRequest:
    return ChatRequest(model="", messages=user(text), **kw)


# --- describing -----------------------------------------------------------------


async def test_describe_models_says_which_are_configured(make_registry: Any) -> None:
    registry = make_registry(kimi_api_key="sk")
    models = {m["name"]: m for m in registry.describe_models()}

    assert models["kimi-k2.6"]["configured"] is True
    assert models["glm-4.6"]["configured"] is False
    assert set(models["glm-4.6"]) >= {"name", "provider", "configured", "context_window",
                                       "max_output_tokens", "thinking", "web_search", "images",
                                       "aliases"}  # fmt: skip
    assert models["kimi-k3"]["thinking"] is True
    assert models["kimi-k3"]["reasoning_efforts"] == ["low", "high", "max"]
    assert models["kimi-k2.7-code"]["preserved_thinking"] is True
    assert "kimi-k2-thinking" not in models  # retired: not a model to list
    assert "k2" in models["kimi-k2.6"]["aliases"]


async def test_status_per_provider(make_registry: Any, emulator: EmulatorServer) -> None:
    registry = make_registry(kimi_api_key="sk")
    emulator.script({"status": 401})
    with pytest.raises(ProviderError):
        await registry.complete(ask(), registry.resolve("kimi-k2"))

    status = registry.status()
    assert status["kimi"]["configured"] and not status["glm"]["configured"]
    assert status["kimi"]["in_flight"] == 0
    assert status["kimi"]["last_error"]["code"] == "PROVIDER_ERROR"
    assert status["glm"]["last_error"] is None


# --- resolving ------------------------------------------------------------------


async def test_unknown_model_names_the_known_ones(make_registry: Any) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_, match="unknown model 'gpt-9'") as caught:
        registry.resolve("gpt-9")
    assert "glm-4.6" in caught.value.message and "kimi-k2.6" in caught.value.message


async def test_model_of_an_unconfigured_provider_says_what_to_set(make_registry: Any) -> None:
    registry = make_registry(kimi_api_key="sk")
    with pytest.raises(ProviderError, match="GLM_API_KEY") as caught:
        registry.resolve("glm-4.6")
    assert caught.value.retryable is False


async def test_aliases_and_the_default_model(make_registry: Any) -> None:
    registry = make_registry(**BOTH, default_model="kimi-code")
    assert registry.resolve("GLM").name == "glm-5.3"
    assert registry.resolve("kimi").name == "kimi-k3"
    assert registry.resolve("glm-flash").name == "glm-4.7-flash"
    assert registry.resolve(None).name == "kimi-k2.7-code"


@pytest.mark.parametrize(
    ("asked", "successor"),
    [("kimi-k2-0711-preview", "kimi-k2.6"), ("K2-Turbo", "kimi-k2.6"),
     ("kimi-latest", "kimi-k3"), ("kimi-k2-thinking-turbo", "kimi-k2.6"),
     ("kimi-k2-thinking", "kimi-k2.6"), ("kimi-thinking", "kimi-k2.6"),
     ("kimi-k2.5", "kimi-k2.6"), ("moonshot-v1-128k", "kimi-k2.6")],
)  # fmt: skip
async def test_a_retired_model_is_refused_with_its_successor(
    make_registry: Any, asked: str, successor: str
) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_) as caught:
        registry.resolve(asked)
    assert caught.value.message == f"{asked} was retired by Moonshot; use {successor}"
    assert caught.value.details == {"retired_model": caught.value.details["retired_model"],
                                    "successor": successor}  # fmt: skip
    assert registry.resolve(successor).name == successor


async def test_explicit_model_without_a_needed_capability(make_registry: Any) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ValidationError_, match="web search"):
        registry.resolve("glm-4.5v", ModelNeeds(web_search=True))


@pytest.mark.parametrize(
    ("keys", "needs", "expected"),
    [
        (BOTH, ModelNeeds(), "glm-5.3"),
        ({"glm_api_key": "g"}, ModelNeeds(), "glm-5.3"),
        ({"kimi_api_key": "sk"}, ModelNeeds(), "kimi-k3"),
        ({"kimi_api_key": "sk"}, ModelNeeds(thinking=True), "kimi-k3"),
        # K3 and K2.7 Code cannot search: K2.6 (which searches without thinking) can.
        ({"kimi_api_key": "sk"}, ModelNeeds(web_search=True), "kimi-k2.6"),
        ({"kimi_api_key": "sk"}, ModelNeeds(min_context_tokens=300_000), "kimi-k3"),
        ({"glm_api_key": "g"}, ModelNeeds(min_context_tokens=1_000_001), "glm-5.3"),
        (BOTH, ModelNeeds(images=True), "kimi-k3"),
        ({"glm_api_key": "g"}, ModelNeeds(images=True), "glm-5v-turbo"),
        ({"glm_api_key": "g"}, ModelNeeds(web_search=True, thinking=True), "glm-5.3"),
    ],
)
async def test_auto_is_deterministic(
    make_registry: Any, keys: dict[str, str], needs: ModelNeeds, expected: str
) -> None:
    registry = make_registry(**keys)
    assert {registry.resolve("auto", needs).name for _ in range(3)} == {expected}


async def test_auto_with_nothing_configured(make_registry: Any) -> None:
    registry = make_registry()
    with pytest.raises(ProviderError, match=r"KIMI_API_KEY.*GLM_API_KEY|GLM_API_KEY.*KIMI_API_KEY"):
        registry.resolve("auto")


async def test_auto_when_no_window_is_large_enough(make_registry: Any) -> None:
    registry = make_registry(**BOTH)
    with pytest.raises(ContextTooLongError, match="1048576"):
        registry.resolve("auto", ModelNeeds(min_context_tokens=2_000_000))


async def test_routing_rules_in_order(make_registry: Any, emulator: EmulatorServer) -> None:
    rules = [
        {"when": {"sensitive": True}, "model": "llama3.1:8b"},
        {"when": {"tool": ["codereview", "precommit"]}, "model": "kimi-k2.7-code"},
        {"when": {"min_context_tokens": 150_000}, "model": "kimi-k2.6"},
    ]
    registry = make_registry(
        **BOTH,
        routing_rules=json.dumps(rules),
        openai_compat_base_url=emulator.base_url_openai,
        openai_compat_models=["llama3.1:8b"],
    )
    await registry.refresh_models()

    assert registry.resolve("auto", ModelNeeds(sensitive=True, tool="codereview")).name == (
        "llama3.1:8b"
    )
    assert registry.resolve("auto", ModelNeeds(tool="codereview")).name == "kimi-k2.7-code"
    assert registry.resolve("auto", ModelNeeds(min_context_tokens=200_000)).name == ("kimi-k2.6")
    assert registry.resolve("auto", ModelNeeds(tool="chat")).name == "glm-5.3"  # no rule

    local = registry.resolve("auto", ModelNeeds(sensitive=True))
    response = await registry.complete(ask("private"), local)
    assert response.provider == "openai_compat" and response.model == "llama3.1:8b"


async def test_a_matching_rule_is_binding(make_registry: Any) -> None:
    rules = [{"when": {"sensitive": True}, "model": "llama3.1:8b"}]
    registry = make_registry(**BOTH, routing_rules=json.dumps(rules))
    with pytest.raises(ValidationError_, match="routing rule"):
        registry.resolve("auto", ModelNeeds(sensitive=True))


@pytest.mark.parametrize(
    "rules",
    [
        "not json",
        '{"when": {}}',
        '[{"when": {"colour": "red"}, "model": "x"}]',
        '[{"when": {}}]',
        '[{"when": {}, "model": "auto"}]',
    ],
)
async def test_invalid_rules_stop_start_up(make_settings: Any, rules: str) -> None:
    with pytest.raises(SettingsError, match="EXAI_ROUTING_RULES"):
        ProviderRegistry.from_settings(make_settings(routing_rules=rules))


async def test_invalid_models_file_stops_start_up(make_settings: Any, tmp_path: Any) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[models."glm-4.6"]\ncontext_window = "big"\n')
    with pytest.raises(SettingsError, match=r"glm-4\.6"):
        ProviderRegistry.from_settings(make_settings(models_file=path))


# --- calling --------------------------------------------------------------------


async def test_complete_emits_one_provider_request(make_registry: Any, events: Events) -> None:
    registry = make_registry(**BOTH)
    response = await registry.complete(ask("audit me", request_id="r1"), registry.resolve("k2"))

    assert response.model == "kimi-k2.6" and response.fallback_from is None
    assert len(events) == 1
    kind, fields = events[0]
    assert kind == "provider_request"
    assert fields["provider"] == "kimi" and fields["model"] == "kimi-k2.6"
    assert fields["status"] == "ok" and fields["error_code"] is None and fields["retries"] == 0
    assert fields["completion_tokens"] == response.usage.completion_tokens
    assert fields["latency_ms"] >= 0
    assert "secret" not in json.dumps(fields)


async def test_registry_sends_what_the_model_accepts(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH)
    await registry.complete(ask(temperature=5.0, thinking=True), registry.resolve("glm-4.6"))
    await registry.complete(ask(thinking=True, temperature=0.3), registry.resolve("kimi-k3"))

    glm, kimi = (r["body"] for r in emulator.requests)
    assert glm["model"] == "glm-4.6" and glm["temperature"] == 1.0  # the top of its range
    assert glm["thinking"] == {"type": "enabled"}
    # K3 always reasons and fixes its temperature: neither a switch nor 0.3 is sent.
    assert kimi["model"] == "kimi-k3" and "thinking" not in kimi and "temperature" not in kimi


async def test_fallback_when_rate_limited(
    make_registry: Any, emulator: EmulatorServer, events: Events
) -> None:
    registry = make_registry(**BOTH, fallback_models=["glm-4.6"])
    emulator.script({"status": 429, "retry_after": 120}, vendor="kimi")
    response = await registry.complete(ask("fall"), registry.resolve("kimi-k2"))

    assert response.provider == "glm" and response.model == "glm-4.6"
    assert response.fallback_from == "kimi-k2.6"
    (note,) = response.notes  # who answered instead, and at what price
    assert note["param"] == "model" and "glm-4.6 answered instead" in note["message"]
    assert [(f["provider"], f["status"], f["error_code"]) for _, f in events] == [
        ("kimi", "error", "RATE_LIMITED"),
        ("glm", "ok", None),
    ]


async def test_no_fallback_for_errors_the_caller_must_fix(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH, fallback_models=["glm-4.6"])
    emulator.script({"status": 401}, vendor="kimi")
    with pytest.raises(ProviderError, match="KIMI_API_KEY"):
        await registry.complete(ask(), registry.resolve("kimi-k2"))
    assert emulator.requests_for("glm") == []


async def test_fallback_skips_models_of_the_failed_provider(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH, fallback_models=["kimi-k2.7-code", "glm-4.5-air"])
    emulator.script({"status": 503}, vendor="kimi")
    response = await registry.complete(ask(), registry.resolve("kimi-k2"))

    assert response.model == "glm-4.5-air"
    assert len(emulator.requests_for("kimi")) == 1


async def test_a_request_with_an_image_falls_back_only_to_models_that_see_images(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH, fallback_models=["glm-4.6", "glm-5v-turbo"])
    emulator.script({"status": 429, "retry_after": 120}, vendor="kimi")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    request = ChatRequest(model="", messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, image]}])  # fmt: skip
    response = await registry.complete(request, registry.resolve("kimi-k2.6"))

    assert response.model == "glm-5v-turbo" and response.fallback_from == "kimi-k2.6"
    assert [r["body"]["model"] for r in emulator.requests_for("glm")] == ["glm-5v-turbo"]


async def test_when_every_model_fails_the_first_error_is_raised(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH, fallback_models=["glm-4.6"])
    emulator.script({"status": 429, "retry_after": 90}, vendor="kimi")
    emulator.script({"status": 500}, vendor="glm")
    with pytest.raises(RateLimitedError) as caught:
        await registry.complete(ask(), registry.resolve("kimi-k2"))
    attempts = caught.value.details["attempts"]
    assert [a["model"] for a in attempts] == ["kimi-k2.6", "glm-4.6"]
    assert caught.value.retry_after_s == 90


async def test_stream_falls_back_before_the_first_delta(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    registry = make_registry(**BOTH, fallback_models=["glm-4.6"])
    emulator.script({"status": 500}, vendor="kimi")
    deltas = [d async for d in registry.stream(ask("s"), registry.resolve("kimi-k2"))]

    done = deltas[-1].response
    assert done is not None and done.provider == "glm"
    assert done.fallback_from == "kimi-k2.6"
    assert "".join(d.text for d in deltas if d.kind == "text") == done.text


async def test_stream_never_falls_back_after_the_first_delta(
    make_registry: Any, emulator: EmulatorServer, events: Events
) -> None:
    registry = make_registry(**BOTH, fallback_models=["glm-4.6"])
    emulator.script({"fail_after_chunks": 3}, vendor="kimi")
    texts = []
    with pytest.raises(ProviderError, match="broke off"):
        async for delta in registry.stream(ask("s"), registry.resolve("kimi-k2")):
            texts.append(delta.text)
    assert texts and emulator.requests_for("glm") == []
    assert events[-1][1]["status"] == "error"


async def test_abandoned_stream_is_recorded_and_frees_its_slot(
    make_registry: Any, events: Events
) -> None:
    registry = make_registry(**BOTH)
    stream = registry.stream(ask("long"), registry.resolve("glm-4.6"))
    await anext(stream)
    await stream.aclose()

    assert events[-1][1]["status"] == "cancelled"
    assert registry.status()["glm"]["in_flight"] == 0


async def test_per_provider_concurrency_limit(make_registry: Any, emulator: EmulatorServer) -> None:
    registry = make_registry(**BOTH, kimi_max_inflight=2, queue_max=0)
    emulator.configure(latency_ms=400)
    info = registry.resolve("kimi-k2")
    running = [asyncio.create_task(registry.complete(ask(f"{i}"), info)) for i in range(2)]
    await asyncio.sleep(0)  # each task takes its slot before its first await
    assert registry.status()["kimi"]["in_flight"] == 2

    with pytest.raises(OverCapacityError):
        await registry.complete(ask("third"), info)
    await asyncio.gather(*running)
    assert registry.status()["kimi"]["in_flight"] == 0


async def test_refresh_models_adds_what_the_endpoint_lists(
    make_registry: Any, emulator: EmulatorServer
) -> None:
    emulator.configure(models=["llama3.1:8b"])
    registry = make_registry(openai_compat_base_url=emulator.base_url_openai)
    await registry.refresh_models()

    described = {m["name"]: m for m in registry.describe_models()}
    assert described["llama3.1:8b"]["provider"] == "openai_compat"
    assert described["llama3.1:8b"]["configured"] is True
