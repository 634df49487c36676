"""Embedding dimensions on each path (rule G-9) and Moonshot's prompt-cache
floor (rule K-11), through the vendors' SDKs."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from zai import ZaiClient
from zai.core._errors import APIStatusError

from .helpers import zai_error

# [G-9] embedding-3 takes 256/512/1024/2048 (default 2048); /v1/embeddings 1..4096.


def test_embedding3_defaults_to_2048(zai: ZaiClient) -> None:
    reply = zai.embeddings.create(model="embedding-3", input=["a cat", "a dog"])
    assert [len(d.embedding) for d in reply.data] == [2048, 2048]


@pytest.mark.parametrize("dimensions", [256, 512, 1024, 2048])
def test_embedding3_takes_its_four_sizes(zai: ZaiClient, dimensions: int) -> None:
    reply = zai.embeddings.create(model="embedding-3", input="a cat", dimensions=dimensions)
    assert len(reply.data[0].embedding) == dimensions


@pytest.mark.parametrize("dimensions", [1, 300, 768, 4096])
def test_embedding3_refuses_other_sizes(zai: ZaiClient, dimensions: int) -> None:
    with pytest.raises(APIStatusError) as caught:
        zai.embeddings.create(model="embedding-3", input="a cat", dimensions=dimensions)
    assert caught.value.response.status_code == 400
    assert zai_error(caught.value) == {
        "code": "1210", "message": "dimensions must be one of 256, 512, 1024, 2048"}  # fmt: skip


def test_the_openai_compatible_path_takes_1_to_4096(kimi: openai.OpenAI) -> None:
    assert len(kimi.embeddings.create(model="m", input="x").data[0].embedding) == 256
    assert (
        len(kimi.embeddings.create(model="m", input="x", dimensions=300).data[0].embedding) == 300
    )
    with pytest.raises(openai.BadRequestError) as caught:
        kimi.embeddings.create(model="m", input="x", dimensions=5000)
    assert caught.value.response.json()["error"]["type"] == "invalid_request_error"


# [K-11] Moonshot caches only prompts longer than 256 tokens; Z.ai any.

OFF = {"thinking": {"type": "disabled"}}


def thread(system_words: int, question: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "word " * system_words},
            {"role": "user", "content": f"question {question}"}]  # fmt: skip


def kimi_cached(client: openai.OpenAI, messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(prompt tokens, cached tokens) in both of Moonshot's usage fields (which agree)."""
    usage = client.chat.completions.create(model="kimi-k2.6", messages=messages,
                                           extra_body=OFF).usage  # fmt: skip
    assert usage is not None and usage.prompt_tokens_details is not None
    top = (usage.model_extra or {})["cached_tokens"]
    assert top == usage.prompt_tokens_details.cached_tokens
    return usage.prompt_tokens, top


def test_moonshot_caches_a_prompt_over_256_tokens(kimi: openai.OpenAI) -> None:
    first, cached = kimi_cached(kimi, thread(300, 1))
    assert first == 302 and cached == 0
    _, cached = kimi_cached(kimi, thread(300, 2))
    assert cached == 301  # the system prompt and "question "
    kimi_cached(kimi, thread(255, 1))  # 257 tokens: just over
    assert kimi_cached(kimi, thread(255, 1)) == (257, 257)


@pytest.mark.parametrize("words", [10, 254])
def test_moonshot_does_not_cache_a_prompt_of_256_tokens_or_fewer(
    kimi: openai.OpenAI, words: int
) -> None:
    first, _ = kimi_cached(kimi, thread(words, 1))
    assert first <= 256
    assert kimi_cached(kimi, thread(words, 1)) == (first, 0)  # even the same prompt again


def test_z_ai_caches_short_prompts(zai: ZaiClient) -> None:
    messages = thread(10, 1)
    zai.chat.completions.create(model="glm-4.6", messages=messages)
    again = zai.chat.completions.create(model="glm-4.6", messages=messages)
    assert again.usage.prompt_tokens_details.cached_tokens == 12
