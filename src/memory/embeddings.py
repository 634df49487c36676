"""Embedding providers: the interface, the plugin loader and the failover chain.

A provider turns texts into vectors (``embed(texts) -> vectors``). Providers are
plugins found through the ``exai.embeddings`` entry-point group, like chat
providers: each entry point names a factory ``(settings) -> provider or None``
(None: not configured). ``EXAI_MEMORY_EMBEDDING_PROVIDERS`` lists the ones to
use, in order of preference; empty means vectors are off and retrieval is by
keyword alone.

:class:`EmbeddingChain` batches the texts and asks the first provider that is
not cooling down. A rate limit (or any other failure) puts that provider in
cooldown (at least its ``Retry-After``) and the batch goes to the next. Every
vector is normalised to length 1 and comes back with the model that made it:
vectors of different models are never compared (see :mod:`exai.memory.base`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from exai.logs import get_logger
from exai.memory.ranking import normalize_vector

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = [
    "ENTRY_POINT_GROUP",
    "Embedded",
    "EmbeddingChain",
    "EmbeddingProvider",
    "EmbeddingRateLimited",
    "EmbeddingUnavailable",
    "load_chain",
]

ENTRY_POINT_GROUP = "exai.embeddings"
log = get_logger("exai.memory")


class EmbeddingRateLimited(Exception):
    """The provider refused for now; ``retry_after_s`` is its hint, when it gave one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class EmbeddingUnavailable(Exception):
    """No provider could embed the texts (all failed or are cooling down)."""


class EmbeddingProvider(ABC):
    """One embedding endpoint and model."""

    name: str
    model: str

    @abstractmethod
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Raises :class:`EmbeddingRateLimited` on a
        rate limit, anything else on other failures."""

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Embedded:
    """Vectors (normalised) and the model that made them."""

    model: str
    vectors: list[list[float]]


class EmbeddingChain:
    """Providers in order of preference, with batching and cooldown on failure."""

    def __init__(
        self,
        providers: Sequence[EmbeddingProvider],
        *,
        batch_size: int = 64,
        cooldown_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.providers = list(providers)
        self.batch_size = max(1, batch_size)
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._cool_until: dict[int, float] = {}  # by position: two may share a name

    @property
    def enabled(self) -> bool:
        return bool(self.providers)

    @property
    def model(self) -> str | None:
        """The preferred model: what ``reembed`` brings every vector to."""
        return self.providers[0].model if self.providers else None

    async def embed(self, texts: Sequence[str]) -> list[Embedded]:
        """The texts' vectors, one :class:`Embedded` per batch, in order."""
        return [
            await self._batch(texts[i : i + self.batch_size])
            for i in range(0, len(texts), self.batch_size)
        ]

    async def embed_one(self, text: str) -> tuple[str, list[float]]:
        done = await self._batch([text])
        return done.model, done.vectors[0]

    async def _batch(self, texts: Sequence[str]) -> Embedded:
        if not self.providers:
            raise EmbeddingUnavailable("no embedding provider is configured")
        problems: list[str] = []
        now = self._clock()
        for slot, provider in enumerate(self.providers):
            until = self._cool_until.get(slot, 0.0)
            if until > now:
                problems.append(f"{provider.name}: cooling down for {until - now:.0f}s")
                continue
            try:
                vectors = await provider.embed(list(texts))
                if len(vectors) != len(texts):
                    raise ValueError(f"returned {len(vectors)} vectors for {len(texts)} texts")
            except EmbeddingRateLimited as exc:
                wait = max(self.cooldown_s, exc.retry_after_s or 0.0)
                self._cool_until[slot] = self._clock() + wait
                problems.append(f"{provider.name}: rate limited")
                log.warning("embedding_rate_limited", provider=provider.name, cooldown_s=wait)
                continue
            except Exception as exc:
                self._cool_until[slot] = self._clock() + self.cooldown_s
                problems.append(f"{provider.name}: {type(exc).__name__}: {exc}")
                log.warning("embedding_failed", provider=provider.name, error=str(exc))
                continue
            self._cool_until.pop(slot, None)
            return Embedded(provider.model, [normalize_vector(v) for v in vectors])
        raise EmbeddingUnavailable("; ".join(problems))

    def status(self) -> dict[str, Any]:
        now = self._clock()
        return {
            "vectors": "on" if self.providers else "off",
            "providers": [
                {
                    "name": p.name,
                    "model": p.model,
                    "cooling_down_s": round(max(0.0, self._cool_until.get(i, 0.0) - now), 1),
                }
                for i, p in enumerate(self.providers)
            ],
        }

    async def aclose(self) -> None:
        for provider in self.providers:
            await provider.aclose()


def load_chain(settings: Settings, group: str = ENTRY_POINT_GROUP) -> EmbeddingChain:
    """The chain ``EXAI_MEMORY_EMBEDDING_PROVIDERS`` names, from the installed plugins.

    A named plugin that is missing, fails to load or is not configured is
    logged and left out: memory then works with the providers that remain.
    """
    found = {ep.name: ep for ep in entry_points(group=group)}
    providers: list[EmbeddingProvider] = []
    for name in settings.memory_embedding_providers:
        ep = found.get(name)
        if ep is None:
            log.error("embedding_plugin_missing", name=name, known=sorted(found))
            continue
        try:
            provider = ep.load()(settings)
        except Exception as exc:
            log.error("embedding_plugin_failed", name=name, error=str(exc))
            continue
        if provider is None:
            log.warning("embedding_plugin_not_configured", name=name)
            continue
        if not isinstance(provider, EmbeddingProvider):
            log.error("embedding_plugin_failed", name=name, error="not an EmbeddingProvider")
            continue
        providers.append(provider)
    return EmbeddingChain(
        providers,
        batch_size=settings.memory_embedding_batch_size,
        cooldown_s=settings.memory_embedding_cooldown_s,
    )
