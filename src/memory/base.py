"""Long-term memory: what a memory is and the interface every backend offers.

A memory is a short statement a principal wants later conversations to know
("this repo targets Python 3.11", "the user wants terse reviews"). It belongs to
that principal and, optionally, to one project (a root path); to any other
principal it does not exist. Each memory may carry one embedding vector, stored
with the model and dimension that produced it, so that a change of model is
noticed and ``exai memory reembed`` can redo them.

:class:`MemoryStore` is the storage contract; SQLite (FTS5 + sqlite-vec) and
Postgres (full-text search + pgvector) implement it and pass one contract
suite. Ranking, fusion and dedup decisions are not here: they are pure
functions in :mod:`exai.memory.ranking`, and :mod:`exai.memory.service` joins
the two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from exai.errors import ValidationError_
from exai.memory.queue import ExtractionQueue
from exai.store.base import ANY_OWNER, AnyOwner, Owner

__all__ = [
    "ANY_OWNER",
    "MEMORY_TYPES",
    "AnyOwner",
    "Memory",
    "MemoryNotFoundError",
    "MemoryStore",
    "MemoryType",
    "NewMemory",
    "Owner",
    "ScoredId",
]

MemoryType = Literal["fact", "preference", "rule", "decision", "reminder", "relationship"]
MEMORY_TYPES: Final[tuple[str, ...]] = MemoryType.__args__  # type: ignore[attr-defined]


class MemoryNotFoundError(ValidationError_):
    """No memory with that id for this principal (another principal's is unknown too).

    A ``VALIDATION_ERROR`` with ``details.reason == "memory_not_found"``: the
    protocol's error codes are shared by every tool, and an id the caller cannot
    use is a bad argument.
    """

    def __init__(self, memory_id: str) -> None:
        super().__init__(
            f"no memory {memory_id!r}: it does not exist or was forgotten; "
            "`recall` or `exai memory list` shows the ids there are",
            details={"reason": "memory_not_found", "id": memory_id},
        )


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory about to be stored; ``content_hash`` comes from :func:`ranking.content_hash`."""

    owner: str
    content: str
    type: str
    content_hash: str
    tags: list[str] = field(default_factory=list)
    project: str | None = None
    source: str = "tool"


@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory. Times are Unix epoch seconds; ``embedding_model`` and
    ``dimension`` describe its vector, None when it has none."""

    id: str
    owner: str
    content: str
    type: str
    tags: list[str]
    project: str | None
    content_hash: str
    source: str
    created_at: float
    updated_at: float
    embedding_model: str | None = None
    dimension: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner": self.owner,
            "content": self.content,
            "type": self.type,
            "tags": list(self.tags),
            "project": self.project,
            "content_hash": self.content_hash,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "embedding_model": self.embedding_model,
            "dimension": self.dimension,
        }


@dataclass(frozen=True, slots=True)
class ScoredId:
    """One hit of a keyword or vector search: higher ``score`` is better.

    Keyword scores are the backend's relevance (BM25 negated, ``ts_rank``);
    vector scores are cosine similarity in [-1, 1].
    """

    id: str
    score: float


class MemoryStore(ABC):
    """Memories and their vectors; ``extraction`` is the store's extraction queue.

    Every method taking an ``owner`` sees that principal's memories only;
    ``ANY_OWNER`` is for operator tooling (the command line). Filters: ``types``
    keeps those types; ``projects`` keeps memories with no project or with one
    of those projects (None: no project filter).
    """

    extraction: ExtractionQueue

    @abstractmethod
    async def insert(
        self, memory: NewMemory, vector: Sequence[float] | None, model: str | None
    ) -> Memory:
        """Store a new memory; when its owner already holds the same ``content_hash``,
        store nothing and return that memory."""

    @abstractmethod
    async def insert_many(
        self, memories: Sequence[tuple[NewMemory, Sequence[float] | None]], model: str | None
    ) -> int:
        """Bulk load in one transaction (import, benchmarks); hash duplicates are
        skipped. Returns how many were stored."""

    @abstractmethod
    async def update(
        self,
        memory_id: str,
        owner: Owner,
        *,
        content: str,
        type: str,
        tags: Sequence[str],
        content_hash: str,
        vector: Sequence[float] | None,
        model: str | None,
    ) -> Memory:
        """Replace a memory's content (a near duplicate refreshed it)."""

    @abstractmethod
    async def set_vector(
        self, memory_id: str, vector: Sequence[float] | None, model: str | None
    ) -> None:
        """Replace only the vector (``exai memory reembed``)."""

    @abstractmethod
    async def get(self, memory_id: str, owner: Owner) -> Memory:
        """Raises :class:`MemoryNotFoundError` for an unknown or foreign id."""

    @abstractmethod
    async def find_hash(self, owner: str, content_hash: str) -> Memory | None: ...

    @abstractmethod
    async def fetch(self, owner: str, ids: Sequence[str]) -> list[Memory]:
        """The memories among ``ids`` that belong to ``owner``, in no set order."""

    @abstractmethod
    async def delete(self, memory_id: str, owner: Owner) -> Memory:
        """Erase a memory and its vector; raises :class:`MemoryNotFoundError`."""

    @abstractmethod
    async def list_memories(
        self,
        owner: Owner,
        *,
        types: Sequence[str] | None = None,
        projects: Sequence[str] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Memory]:
        """Most recently updated first."""

    @abstractmethod
    async def count(self, owner: Owner) -> int: ...

    @abstractmethod
    async def keyword_search(
        self,
        owner: str,
        terms: Sequence[str],
        limit: int,
        *,
        types: Sequence[str] | None = None,
        projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:
        """Memories matching any of ``terms`` (plain words), best first."""

    @abstractmethod
    async def vector_search(
        self,
        owner: str,
        vector: Sequence[float],
        model: str,
        limit: int,
        *,
        types: Sequence[str] | None = None,
        projects: Sequence[str] | None = None,
    ) -> list[ScoredId]:
        """Nearest memories by cosine similarity among those embedded by ``model``
        with the same dimension, best first."""

    @abstractmethod
    async def stale_vectors(
        self, model: str | None, dimension: int | None, limit: int
    ) -> list[Memory]:
        """Memories whose vector is missing or from another model or dimension."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """The backend, and how vectors are searched (index, or the slower scan and why)."""

    @abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
