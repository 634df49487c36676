"""Cached prompt tokens, as each vendor reports them, read through the real SDKs.

The emulator reports the longest prefix a prompt shares with one it has seen
before (for the same vendor, model and key) as
``usage.prompt_tokens_details.cached_tokens``; each plugin must carry that into
``Usage.cached_prompt_tokens``, whole and streamed. Moonshot only caches prompts
longer than 256 tokens (rule K-11 of :mod:`exai.emulators.contract`), so the
thread's system prompt here is longer than that.
"""

from __future__ import annotations

from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.providers.base import ChatRequest, ChatResponse, Usage
from exai.providers.exchange import ChatCompletionsProvider
from exai.providers.wire import usage_from

SYSTEM = {"role": "system", "content": "You review code. " * 100}  # 300 tokens
KIMI = "kimi-k2.6"  # asked with thinking off: a plain Moonshot model


def turn(n: int) -> list[dict[str, Any]]:
    """The messages of turn ``n`` of a thread whose earlier turns never change."""
    messages: list[dict[str, Any]] = [SYSTEM]
    for i in range(1, n):
        messages += [{"role": "user", "content": f"question {i}"},
                     {"role": "assistant", "content": f"answer {i}"}]  # fmt: skip
    return [*messages, {"role": "user", "content": f"question {n}"}]


async def ask(provider: ChatCompletionsProvider, model: str, messages: list[dict[str, Any]],
              *, streamed: bool) -> ChatResponse:  # fmt: skip
    request = ChatRequest(model=model, messages=messages,
                          thinking=False if model.startswith("kimi-") else None)  # fmt: skip
    if not streamed:
        return await provider.complete(request)
    async for delta in provider.stream(request):
        if delta.response is not None:
            return delta.response
    raise AssertionError("no response")


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(("vendor", "model"), [("kimi", KIMI), ("glm", "glm-4.6")])
async def test_a_stable_prefix_is_reported_cached_on_the_next_turn(
    kimi: Any, glm: Any, emulator: EmulatorServer, vendor: str, model: str, streamed: bool
) -> None:
    provider: ChatCompletionsProvider = kimi if vendor == "kimi" else glm
    first = await ask(provider, model, turn(1), streamed=streamed)
    second = await ask(provider, model, turn(2), streamed=streamed)

    assert first.usage.cached_prompt_tokens == 0  # nothing seen yet
    # Turn 2 begins with all of turn 1's prompt: the system prompt and "question 1".
    shared = second.usage.cached_prompt_tokens
    assert shared == first.usage.prompt_tokens
    assert 0 < shared < second.usage.prompt_tokens
    sent = emulator.requests_for(vendor)[-1]["body"]
    assert sent["messages"][:2] == turn(1)


async def test_a_changed_prefix_is_not_cached(kimi: Any, emulator: EmulatorServer) -> None:
    await ask(kimi, KIMI, turn(2), streamed=False)
    changed = [{"role": "system", "content": "Now: 12:00. " + SYSTEM["content"]}, *turn(2)[1:]]
    again = await ask(kimi, KIMI, changed, streamed=False)

    assert again.usage.cached_prompt_tokens == 0  # one byte early on spoils the cache


async def test_the_cache_belongs_to_one_model(glm: Any, emulator: EmulatorServer) -> None:
    await ask(glm, "glm-4.6", turn(1), streamed=False)
    other = await ask(glm, "glm-4.5", turn(1), streamed=False)
    assert other.usage.cached_prompt_tokens == 0


@pytest.mark.parametrize(("vendor", "model", "cached"), [("kimi", KIMI, False),
                                                         ("glm", "glm-4.6", True)])  # fmt: skip
async def test_moonshot_does_not_cache_a_short_prompt(
    kimi: Any, glm: Any, vendor: str, model: str, cached: bool
) -> None:
    provider: ChatCompletionsProvider = kimi if vendor == "kimi" else glm
    short = [{"role": "system", "content": "You review code. " * 80}]  # 240 tokens
    first = await ask(provider, model, [*short, {"role": "user", "content": "q 1"}], streamed=False)
    again = await ask(provider, model, [*short, {"role": "user", "content": "q 2"}], streamed=False)

    assert first.usage.prompt_tokens <= 256
    assert (again.usage.cached_prompt_tokens > 0) is cached  # Z.ai has no threshold


@pytest.mark.parametrize(
    ("usage", "cached"),
    [
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}}, 64),  # Z.ai, K2
        ({"prompt_tokens": 100, "cached_tokens": 30}, 30),  # Moonshot's explicit cache (v1)
        ({"prompt_tokens": 100, "prompt_tokens_details": None}, 0),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}}, 10),
    ],
)
def test_each_vendors_cached_field_is_read(usage: dict[str, Any], cached: int) -> None:
    parsed = usage_from(usage)
    assert parsed is not None and parsed.cached_prompt_tokens == cached


def test_usage_adds_and_reports_cache_hits() -> None:
    total = Usage(prompt_tokens=10, cached_prompt_tokens=0)
    assert total.metadata()["cache_hit"] is False
    total.add(Usage(prompt_tokens=20, cached_prompt_tokens=15))
    assert total.metadata() == {
        "usage": {"prompt_tokens": 30, "completion_tokens": 0, "reasoning_tokens": 0,
                  "cached_prompt_tokens": 15, "total_tokens": 30},
        "cache_hit": True,
    }  # fmt: skip


def test_the_emulated_cache_reports_the_longest_shared_prefix_in_tokens() -> None:
    from exai.emulators.prompt_cache import PromptCache

    cache, key = PromptCache(), ("kimi", "m", "k")
    one = [{"role": "system", "content": "a b c"}, {"role": "user", "content": "d e"}]
    assert cache.observe(key, one, longer_than=5) == 0  # not remembered: 5 tokens only
    assert cache.observe(key, one) == 0
    assert cache.observe(key, one) == 5  # the same prompt again: all of it
    longer = [*one[:1], {"role": "user", "content": "d e f"}]
    assert cache.observe(key, longer) == 4  # "e" became "e " and so differs
    other_role = [{"role": "user", "content": "a b c"}]
    assert cache.observe(key, other_role) == 0  # a different message, from its start
    assert cache.observe(("kimi", "m", "other key"), one) == 0
