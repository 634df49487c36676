"""The OpenAI-compatible plugin (Ollama, vLLM, OpenRouter...) against the emulator."""

from __future__ import annotations

import pytest

from exai.emulators.provider import EmulatorServer
from exai.errors import ContextTooLongError, ProviderError
from exai.providers.base import ChatRequest
from exai.providers.openai_compat import OpenAICompatibleProvider

from .helpers import FAST_RETRY, user


async def test_models_are_discovered_when_none_are_configured(
    compat: OpenAICompatibleProvider, emulator: EmulatorServer
) -> None:
    emulator.configure(models=["llama3.1:8b", "qwen2.5-coder:7b"])
    assert await compat.list_models() == ["llama3.1:8b", "qwen2.5-coder:7b"]


async def test_configured_models_win_over_discovery(emulator: EmulatorServer) -> None:
    provider = OpenAICompatibleProvider(
        base_url=emulator.base_url_openai, api_key="k", models=["mine"], retry=FAST_RETRY
    )
    try:
        assert await provider.list_models() == ["mine"]
        assert emulator.requests == []
    finally:
        await provider.aclose()


async def test_complete_and_stream(
    compat: OpenAICompatibleProvider, emulator: EmulatorServer
) -> None:
    req = ChatRequest(model="llama3.1:8b", messages=user("local?"), temperature=1.5)
    response = await compat.complete(req)
    deltas = [d async for d in compat.stream(req)]

    assert response.text == "emulated reply #1 to: local? (saw 1 messages)"
    assert response.provider == "openai_compat"
    assert deltas[-1].response is not None and deltas[-1].response.text == response.text
    whole, streamed = (r["body"] for r in emulator.requests)
    assert whole["temperature"] == 1.5
    assert streamed["stream_options"] == {"include_usage": True}


async def test_web_search_is_not_offered(
    compat: OpenAICompatibleProvider, emulator: EmulatorServer
) -> None:
    await compat.complete(ChatRequest(model="m", messages=user("x"), web_search=True))
    assert "tools" not in emulator.requests[0]["body"]


async def test_errors_are_mapped(
    compat: OpenAICompatibleProvider, emulator: EmulatorServer
) -> None:
    emulator.script({"status": 400, "body": {"error": {
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
                   "5000 tokens", "type": "BadRequestError", "code": 400}}})  # fmt: skip
    with pytest.raises(ContextTooLongError):
        await compat.complete(ChatRequest(model="m", messages=user("x")))

    emulator.script({"status": 402, "body": {"error": {"message": "Insufficient credits"}}})
    with pytest.raises(ProviderError, match="balance") as caught:
        await compat.complete(ChatRequest(model="m", messages=user("x")))
    assert not caught.value.retryable


def test_configured_by_base_url_alone() -> None:
    assert OpenAICompatibleProvider(base_url="http://localhost:11434/v1", api_key=None).configured()
    assert not OpenAICompatibleProvider(base_url=None, api_key="k").configured()
