"""Embedding plugins against the emulator's endpoints, and the failover chain."""

from __future__ import annotations

import pytest

from exai.emulators.embeddings import embed_text
from exai.memory.embedders import GlmEmbeddings, OpenAICompatEmbeddings
from exai.memory.embeddings import EmbeddingChain, EmbeddingUnavailable, load_chain
from exai.memory.ranking import cosine
from tests.conftest import make_settings


@pytest.fixture
def emulator(provider_emulator):
    provider_emulator.reset()
    yield provider_emulator
    provider_emulator.configure(embeddings_status=200, embeddings_retry_after=None)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_emulator_vectors_put_similar_text_close() -> None:
    near = cosine(embed_text("this repo targets Python 3.11"), embed_text("repo target python"))
    far = cosine(embed_text("this repo targets Python 3.11"), embed_text("terse code reviews"))
    assert near > 0.5 > far
    assert embed_text("same text") == embed_text("same text")


async def test_both_plugins_batch_and_fail_over_with_cooldown(emulator, tmp_path) -> None:
    glm = GlmEmbeddings("k", emulator.base_url_glm, "embedding-3", 256, 10.0)
    oai = OpenAICompatEmbeddings("k", emulator.base_url_kimi, "emu-small", 256, 10.0)
    clock = Clock()
    chain = EmbeddingChain([glm, oai], batch_size=2, cooldown_s=30.0, clock=clock)
    done = await chain.embed(["a b", "c d", "e f"])
    assert [(d.model, len(d.vectors)) for d in done] == [("embedding-3", 2), ("embedding-3", 1)]
    assert done[0].vectors[0] == pytest.approx(embed_text("a b", 256))
    sent = [r for r in emulator.requests if r["path"] == "/api/paas/v4/embeddings"]
    assert [r["body"]["input"] for r in sent] == [["a b", "c d"], ["e f"]]
    assert sent[0]["body"]["dimensions"] == 256

    emulator.configure(embeddings_status=429, embeddings_retry_after=120)
    with pytest.raises(EmbeddingUnavailable, match="rate limited"):
        await chain.embed_one("x")  # both share the emulator: both refuse
    emulator.configure(embeddings_status=200, embeddings_retry_after=None)
    with pytest.raises(EmbeddingUnavailable, match="cooling down"):
        await chain.embed_one("x")
    clock.now += 121  # Retry-After (120 s) outlasts the 30 s cooldown
    model, vector = await chain.embed_one("x")
    assert model == "embedding-3" and len(vector) == 256
    status = chain.status()
    assert status["vectors"] == "on" and status["providers"][0]["cooling_down_s"] == 0
    await chain.aclose()


async def test_a_failing_provider_hands_over_to_the_next(emulator) -> None:
    broken = OpenAICompatEmbeddings("k", "http://127.0.0.1:9/v1", "gone", None, 2.0)
    oai = OpenAICompatEmbeddings("k", emulator.base_url_kimi, "emu-small", None, 10.0)
    chain = EmbeddingChain([broken, oai], cooldown_s=60.0)
    model, vector = await chain.embed_one("hello world")
    assert model == "emu-small" and len(vector) == 256
    assert chain.status()["providers"][0]["cooling_down_s"] > 0
    await chain.aclose()


def test_load_chain_follows_the_setting(tmp_path) -> None:
    none = load_chain(make_settings(tmp_path))
    assert not none.enabled and none.status()["vectors"] == "off"
    named = load_chain(make_settings(
        tmp_path, memory_embedding_providers="openai_compat,glm,nope",
        memory_openai_embedding_base_url="http://127.0.0.1:1/v1", glm_api_key="k",
    ))  # fmt: skip
    assert [p.name for p in named.providers] == ["openai_compat", "glm"]
