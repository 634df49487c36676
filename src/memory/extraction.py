"""Automatic extraction (off by default): a background worker turns user messages into memories.

After a stored turn, the user's message is queued in the memory store
(``memory_extraction_queue``, so the queue survives a restart) without the call
waiting for it. A worker task takes one job at a time under a lease, asks a
configured cheap model for the memories the message states, as JSON, and
stores them through :class:`~exai.memory.service.MemoryService` (dedup and
audit included). The model call is never on a tool call's path.

Nothing is invented: a reply that is not the JSON asked for stores nothing,
and an item whose words are mostly absent from the user's message is dropped
(:func:`parse_extraction`). A failure is logged and audited
(``memory_extraction_failed``) and the job is retried until
``EXAI_MEMORY_EXTRACTION_MAX_ATTEMPTS``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Final

from exai.logs import get_logger
from exai.memory.base import MEMORY_TYPES
from exai.memory.ranking import query_terms
from exai.memory.service import MAX_CONTENT_CHARS, MemoryService

__all__ = ["EXTRACTION_PROMPT", "ExtractionWorker", "parse_extraction"]

log = get_logger("exai.memory")
EXTRACTION_PROMPT: Final = (
    "Extract durable facts, preferences, rules, decisions, reminders and relationships that "
    "the user states about themselves, their project or their team in the message below. "
    "Only what the message states; no guesses. Reply with JSON only: "
    '{"memories": [{"content": "...", "type": "fact|preference|rule|decision|reminder|'
    'relationship", "tags": ["..."]}]}, or {"memories": []} when there is nothing durable.'
)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
_MAX_ITEMS = 10
_LEASE_S = 300.0
_IDLE_S = 1.0


class ExtractionError(Exception):
    """The model's reply is not the JSON asked for."""


def parse_extraction(reply: str, message: str) -> list[dict[str, Any]]:
    """The memories in a model's reply that the user's message supports.

    Raises :class:`ExtractionError` when the reply is not ``{"memories": [...]}``.
    An item is kept when its type is known (else ``fact``) and at least half of
    its words occur in ``message``: a model restating the message passes, one
    adding what the user never said does not.
    """
    try:
        data = json.loads(_FENCE.sub("", reply.strip()))
    except ValueError as exc:
        raise ExtractionError(f"the reply is not JSON: {exc}") from None
    items = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ExtractionError('the reply has no "memories" list')
    said = set(query_terms(message))
    kept: list[dict[str, Any]] = []
    for item in items[:_MAX_ITEMS]:
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            continue
        content = item["content"].strip()[:MAX_CONTENT_CHARS]
        words = query_terms(content)
        if not words or sum(w in said for w in words) * 2 < len(words):
            continue
        kind = item.get("type") if item.get("type") in MEMORY_TYPES else "fact"
        tags = [t for t in item.get("tags") or [] if isinstance(t, str)][:16]
        kept.append({"content": content, "type": kind, "tags": tags})
    return kept


class ExtractionWorker:
    """The background task that drains the extraction queue."""

    def __init__(self, service: MemoryService, providers: Any, model: str,
                 max_attempts: int) -> None:  # fmt: skip
        self.service = service
        self.providers = providers
        self.model = model
        self.max_attempts = max_attempts
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def may_serve(self, allowed: frozenset[str] | None) -> bool:
        """Whether a principal limited to ``allowed`` models may have its messages
        read by the extraction model (None: every model)."""
        if allowed is None:
            return True
        try:
            self.providers.resolve(self.model, allowed=allowed)
        except Exception:
            return False
        return True

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="exai-memory-extraction")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                worked = await self.run_once()
            except Exception:
                log.exception("memory_extraction_loop_failed")
                worked = False
            if not worked:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), _IDLE_S)
                except TimeoutError:
                    pass

    async def run_once(self) -> bool:
        """Take and process one job; False when the queue had none ready."""
        from exai.providers import ChatRequest

        queue = self.service.store.extraction
        job = await queue.claim(_LEASE_S)
        if job is None:
            return False
        try:
            info = self.providers.resolve(self.model)
            request = ChatRequest(
                model=info.model_id, temperature=0,
                messages=[{"role": "system", "content": EXTRACTION_PROMPT},
                          {"role": "user", "content": job.text}],
            )  # fmt: skip
            response = await self.providers.complete(request, info)
            items = parse_extraction(response.text, job.text)
            for item in items:
                await self.service.remember(
                    job.owner, item["content"], item["type"], item["tags"], job.project,
                    source="extraction",
                )  # fmt: skip
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("memory_extraction_failed", job=job.id, attempts=job.attempts, error=error)
            self.service.emit(
                "memory_extraction_failed", principal=job.owner, job_id=job.id,
                thread_id=job.thread_id, attempts=job.attempts, error=error[:500],
            )  # fmt: skip
            await queue.finish(job.id, error, self.max_attempts)
            return True
        await queue.finish(job.id, None, self.max_attempts)
        return True
