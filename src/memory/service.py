"""The memory service: what the tools, the command line and history injection call.

It joins a :class:`~exai.memory.base.MemoryStore` (I/O), an
:class:`~exai.memory.embeddings.EmbeddingChain` (I/O) and the pure decisions of
:mod:`exai.memory.ranking` and :mod:`exai.memory.block`, and records an audit
event for every memory written, recalled, injected or forgotten. Audit events
carry ids, types and counts, never a memory's content.

When embedding fails (no provider, all cooling down) a memory is stored without
a vector and recall falls back to keywords: memory degrades, it does not stop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from exai.errors import ValidationError_
from exai.logs import get_logger
from exai.memory.base import MEMORY_TYPES, Memory, MemoryStore, NewMemory, Owner, ScoredId
from exai.memory.block import MemoryBlock, build_block
from exai.memory.embeddings import EmbeddingChain, EmbeddingUnavailable
from exai.memory.ranking import (
    Ranked,
    RankingWeights,
    content_hash,
    dedup_action,
    fuse,
    normalize_content,
    query_terms,
)
from exai.settings import Settings
from exai.settings.values import parse_type_weights

__all__ = ["MAX_CONTENT_CHARS", "MemoryConfig", "MemoryService", "Remembered"]

MAX_CONTENT_CHARS = 4000
MAX_TAGS = 16
log = get_logger("exai.memory")


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    weights: RankingWeights
    max_results: int = 10
    token_budget: int = 500
    dedup_similarity: float = 0.95

    @classmethod
    def from_settings(cls, settings: Settings) -> MemoryConfig:
        return cls(
            weights=RankingWeights(
                type_weights=parse_type_weights(settings.memory_type_weights),
                min_similarity=settings.memory_min_similarity,
                recency_half_life_days=settings.memory_recency_half_life_days,
            ),
            max_results=settings.memory_max_results,
            token_budget=settings.memory_token_budget,
            dedup_similarity=settings.memory_dedup_similarity,
        )


@dataclass(frozen=True, slots=True)
class Remembered:
    memory: Memory
    action: str  # "insert", "update" (a near duplicate refreshed) or "duplicate"


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        chain: EmbeddingChain,
        config: MemoryConfig,
        emit: Callable[..., None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chain = chain
        self.config = config
        self._emit = emit or (lambda kind, **fields: None)
        self._clock = clock
        self.worker: Any = None  # the ExtractionWorker, when extraction is on
        self._pending: set[asyncio.Task[Any]] = set()

    def emit(self, kind: str, **fields: Any) -> None:
        self._emit(kind, **fields)

    def queue_extraction(
        self, owner: str, text: str, thread_id: str | None, project: str | None, *,
        allowed: frozenset[str] | None = None,
    ) -> None:  # fmt: skip
        """Queue a user message for the extraction worker, without waiting for the write.

        ``allowed``: the models ``owner`` may use; nothing is queued when the extraction
        model (EXAI_MEMORY_EXTRACTION_MODEL) is not one of them.
        """
        if self.worker is None or not self.worker.may_serve(allowed):
            return

        async def enqueue() -> None:
            try:
                await self.store.extraction.enqueue(owner, text, thread_id, project)
                self.worker.wake()
            except Exception as exc:
                log.warning("memory_extraction_enqueue_failed", error=str(exc))

        task = asyncio.create_task(enqueue())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _vector(self, text: str) -> tuple[str | None, list[float] | None]:
        if not self.chain.enabled:
            return None, None
        try:
            model, vector = await self.chain.embed_one(text)
        except EmbeddingUnavailable as exc:
            log.warning("memory_embedding_unavailable", error=str(exc))
            return None, None
        return model, vector

    async def remember(
        self,
        owner: str,
        content: str,
        type: str = "fact",
        tags: Sequence[str] = (),
        project: str | None = None,
        source: str = "tool",
    ) -> Remembered:
        new = _validated(owner, content, type, tags, project, source)
        text, clean_tags, digest = new.content, new.tags, new.content_hash
        existing = await self.store.find_hash(owner, digest)
        model, vector = (None, None) if existing else await self._vector(text)
        nearest = None
        if vector is not None and model is not None:
            hits = await self.store.vector_search(owner, vector, model, 1)
            nearest = hits[0] if hits else None
        action, target = dedup_action(existing is not None, nearest,
                                      self.config.dedup_similarity)  # fmt: skip
        if action == "duplicate" and existing is not None:
            memory = existing
        elif action == "update" and target is not None:
            memory = await self.store.update(
                target, owner, content=text, type=type, tags=clean_tags, content_hash=digest,
                vector=vector, model=model,
            )  # fmt: skip
        else:
            memory = await self.store.insert(new, vector, model)
        self._emit("memory_written", principal=owner, memory_id=memory.id, action=action,
                   memory_type=type, source=source, embedded=vector is not None)  # fmt: skip
        return Remembered(memory, action)

    async def import_many(
        self, items: Sequence[tuple[str, str, str, Sequence[str], str | None]], source: str
    ) -> int:
        """Store many memories at once, each ``(owner, content, type, tags, project)``:
        validated as :meth:`remember` does, embedded in batches, and handed to the store
        in one ``insert_many`` per principal and embedding model, so that its bulk path
        (on Postgres, indexes built after the load) sees the whole import. Exact
        duplicates are skipped; near duplicates are not merged. Without embeddings (none
        configured, or none answering) memories are stored without vectors, as
        :meth:`remember` stores them. Returns how many were stored."""
        new = [_validated(*item, source=source) for item in items]
        vectors: list[tuple[str | None, list[float] | None]] = [(None, None)] * len(new)
        if self.chain.enabled:
            try:
                batches = await self.chain.embed([m.content for m in new])
            except EmbeddingUnavailable as exc:
                log.warning("memory_embedding_unavailable", error=str(exc))
                batches = []
            done = 0
            for embedded in batches:
                for vector in embedded.vectors:
                    vectors[done] = (embedded.model, vector)
                    done += 1
        # One insert_many per principal and model: audited per principal, as writes are.
        groups: dict[tuple[str, str | None], list[tuple[NewMemory, list[float] | None]]] = {}
        for memory, (model, vector) in zip(new, vectors, strict=True):
            groups.setdefault((memory.owner, model), []).append((memory, vector))
        stored = 0
        for (owner, model), rows in groups.items():
            count = await self.store.insert_many(rows, model)
            self._emit("memory_imported", principal=owner, count=count, offered=len(rows),
                       source=source, embedded=model is not None)  # fmt: skip
            stored += count
        return stored

    async def recall(
        self,
        owner: str,
        query: str,
        *,
        limit: int | None = None,
        types: Sequence[str] | None = None,
        projects: Sequence[str] | None = None,
        vectors: bool = True,
        audit: bool = True,
    ) -> list[Ranked]:
        """The memories most relevant to ``query``, best first (hybrid when vectors are on)."""
        limit = min(limit or self.config.max_results, 100)
        depth = max(limit * 3, 20)  # each list is searched deeper than the answer needs
        terms = query_terms(query)

        async def nearest() -> list[ScoredId]:
            model, vector = await self._vector(query) if vectors else (None, None)
            if vector is None or model is None:
                return []
            return await self.store.vector_search(owner, vector, model, depth, types=types,
                                                  projects=projects)  # fmt: skip

        # The two searches at once: on Postgres each has a connection of its own, and
        # the query's embedding (an HTTP call) overlaps the keyword search everywhere.
        async with asyncio.TaskGroup() as group:
            keyword_task = group.create_task(
                self.store.keyword_search(owner, terms, depth, types=types, projects=projects)
            )
            vector_task = group.create_task(nearest())
        keyword, vector_hits = keyword_task.result(), vector_task.result()
        ids = list(dict.fromkeys([h.id for h in keyword] + [h.id for h in vector_hits]))
        found = {m.id: m for m in await self.store.fetch(owner, ids)}
        ranked = fuse(keyword, vector_hits, found, self.config.weights, self._clock(), limit)
        if audit:
            self._emit("memory_recalled", principal=owner, count=len(ranked),
                       memory_ids=[r.memory.id for r in ranked])  # fmt: skip
        return ranked

    async def forget(self, owner: Owner, memory_id: str) -> Memory:
        memory = await self.store.delete(memory_id, owner)
        self._emit("memory_forgotten", principal=memory.owner, memory_id=memory.id)
        return memory

    async def block_for(
        self,
        owner: str,
        prompt: str,
        count_tokens: Callable[[str], int],
        projects: Sequence[str] | None = None,
    ) -> MemoryBlock | None:
        """The memory block for a new thread whose first prompt is ``prompt``."""
        ranked = await self.recall(owner, prompt, projects=projects, audit=False)
        return build_block([r.memory for r in ranked], self.config.token_budget, count_tokens)

    def injected(self, owner: str, thread_id: str, ids: Sequence[str], tokens: int) -> None:
        self._emit("memory_injected", principal=owner, thread_id=thread_id,
                   memory_ids=list(ids), tokens=tokens)  # fmt: skip

    async def reembed(self, batch: int = 256) -> int:
        """Give every memory a vector from the preferred model; returns how many changed."""
        if not self.chain.enabled:
            raise ValidationError_("no embedding provider is configured "
                                   "(EXAI_MEMORY_EMBEDDING_PROVIDERS)")  # fmt: skip
        done = 0
        skipped: set[str] = set()
        while True:
            model = self.chain.model
            probe = await self.chain.embed_one("dimension probe")
            stale = [m for m in await self.store.stale_vectors(probe[0], len(probe[1]), batch)
                     if m.id not in skipped]  # fmt: skip
            if not stale:
                return done
            for embedded, chunk in zip(
                await self.chain.embed([m.content for m in stale]),
                [stale[i : i + self.chain.batch_size]
                 for i in range(0, len(stale), self.chain.batch_size)],
                strict=True,
            ):  # fmt: skip
                for memory, vector in zip(chunk, embedded.vectors, strict=True):
                    await self.store.set_vector(memory.id, vector, embedded.model)
                    if embedded.model != model:
                        skipped.add(memory.id)  # a fallback model; not what reembed aims at
                    done += 1

    def status(self) -> dict[str, Any]:
        return {**self.store.status(), **self.chain.status()}

    async def aclose(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self.worker is not None:
            await self.worker.stop()
        await self.chain.aclose()
        await self.store.aclose()


def _validated(owner: str, content: str, type: str, tags: Sequence[str], project: str | None,
               source: str) -> NewMemory:  # fmt: skip
    text = normalize_content(content)
    if not text:
        raise ValidationError_("a memory needs some content")
    if len(text) > MAX_CONTENT_CHARS:
        raise ValidationError_(
            f"a memory holds at most {MAX_CONTENT_CHARS} characters (got {len(text)}); "
            "store one statement per memory"
        )
    if type not in MEMORY_TYPES:
        raise ValidationError_(f"unknown memory type {type!r}; one of {list(MEMORY_TYPES)}")
    clean_tags = list(dict.fromkeys(t.strip() for t in tags if t.strip()))[:MAX_TAGS]
    return NewMemory(owner, text, type, content_hash(text), clean_tags, project, source)
