"""The built-in embedding plugins: GLM ``embedding-3`` and any OpenAI-compatible endpoint.

* ``glm``: Z.ai's ``POST {base}/embeddings`` through ``zai-sdk`` (the same
  client and key as GLM chat, ``GLM_API_KEY`` and ``GLM_BASE_URL``). The SDK is
  synchronous, so it runs on a small thread pool of its own, never on the
  event loop.
* ``openai_compat``: ``POST {base}/v1/embeddings`` through the ``openai`` SDK,
  for OpenAI itself, a local Ollama or anything else speaking that API
  (``EXAI_MEMORY_OPENAI_EMBEDDING_*``).

Registered in ``pyproject.toml`` under ``exai.embeddings``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from exai.memory.embeddings import EmbeddingProvider, EmbeddingRateLimited

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["GlmEmbeddings", "OpenAICompatEmbeddings", "create_glm", "create_openai_compat"]


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


class GlmEmbeddings(EmbeddingProvider):
    name = "glm"

    def __init__(self, api_key: str, base_url: str, model: str, dimensions: int | None,
                 timeout_s: float) -> None:  # fmt: skip
        from zai import ZaiClient, ZhipuAiClient

        client_class = ZhipuAiClient if "bigmodel.cn" in base_url else ZaiClient
        self.model = model
        self._dimensions = dimensions
        self._client = client_class(api_key=api_key, base_url=base_url.rstrip("/"),
                                    timeout=timeout_s, max_retries=0)  # fmt: skip
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="exai-glm-embed")

    def _call(self, texts: list[str]) -> list[list[float]]:
        from zai.core import APIReachLimitError, APIStatusError

        extra: dict[str, Any] = {}
        if self._dimensions:
            extra["dimensions"] = self._dimensions
        try:
            reply = self._client.embeddings.create(input=texts, model=self.model, **extra)
        except (APIReachLimitError, APIStatusError) as exc:
            if isinstance(exc, APIReachLimitError) or exc.status_code == 429:
                raise EmbeddingRateLimited(str(exc), _retry_after(exc.response.headers)) from exc
            raise
        ordered = sorted(reply.data, key=lambda item: item.index or 0)
        return [list(item.embedding) for item in ordered]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._call, list(texts))

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False)


class OpenAICompatEmbeddings(EmbeddingProvider):
    name = "openai_compat"

    def __init__(self, api_key: str, base_url: str, model: str, dimensions: int | None,
                 timeout_s: float) -> None:  # fmt: skip
        from openai import AsyncOpenAI

        self.model = model
        self._dimensions = dimensions
        self._client = AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s,
                                   max_retries=0)  # fmt: skip

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        extra: dict[str, Any] = {}
        if self._dimensions:
            extra["dimensions"] = self._dimensions
        try:
            reply = await self._client.embeddings.create(
                input=list(texts), model=self.model, encoding_format="float", **extra
            )
        except openai.RateLimitError as exc:
            raise EmbeddingRateLimited(str(exc), _retry_after(exc.response.headers)) from exc
        ordered = sorted(reply.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]

    async def aclose(self) -> None:
        await self._client.close()


def create_glm(settings: Settings) -> GlmEmbeddings | None:
    if settings.glm_api_key is None:
        return None
    return GlmEmbeddings(
        settings.glm_api_key.get_secret_value(), settings.glm_base_url,
        settings.memory_glm_embedding_model, settings.memory_embedding_dimensions,
        settings.provider_timeout_s,
    )  # fmt: skip


def create_openai_compat(settings: Settings) -> OpenAICompatEmbeddings | None:
    if not settings.memory_openai_embedding_base_url:
        return None
    key = settings.memory_openai_embedding_api_key
    return OpenAICompatEmbeddings(
        key.get_secret_value() if key is not None else "unused",
        settings.memory_openai_embedding_base_url, settings.memory_openai_embedding_model,
        settings.memory_embedding_dimensions, settings.provider_timeout_s,
    )  # fmt: skip
