"""The provider plugin interface: what every model backend implements.

Messages are plain dicts in the OpenAI chat format (``role``, ``content``, and
``tool_calls`` / ``tool_call_id`` where they apply); reasoning text never goes in
``content`` and is returned apart. A provider raises only :mod:`exai.errors`
exceptions (``RateLimitedError``, ``ContextTooLongError``, ``ProviderError``...)
with ``retryable`` set truthfully; SDK exceptions never escape a plugin.

Plugins are found through the ``exai.providers`` entry-point group; each entry
point names a factory ``(settings) -> Provider``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "Delta",
    "ExtractedFile",
    "Provider",
    "Usage",
]


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    # Prompt tokens the vendor served from its prompt cache and bills at the cached
    # price; they are part of ``prompt_tokens``, not in addition to them.
    cached_prompt_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens

    @property
    def cache_hit(self) -> bool:
        return self.cached_prompt_tokens > 0

    def metadata(self) -> dict[str, Any]:
        """The result metadata keys for this usage: ``usage`` and ``cache_hit``."""
        return {"usage": self.as_dict(), "cache_hit": self.cache_hit}

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(slots=True)
class ChatRequest:
    model: str  # the provider's own model id, already resolved from aliases
    messages: list[dict[str, Any]]
    temperature: float | None = None
    max_output_tokens: int | None = None
    thinking: bool | None = None  # None: the model's default
    # Whether the model reasons on this call, as the catalogue knows it (None: not
    # known). Decides which stored reasoning is sent back with the history.
    thinks: bool | None = None
    web_search: bool = False
    request_id: str | None = None  # for logs and audit correlation
    # A reply cut by the output limit is continued until it is whole; off when the
    # caller set max_output_tokens to get a short reply, and a cut one is the answer.
    continue_cut: bool = True


@dataclass(slots=True)
class ChatResponse:
    text: str
    model: str
    provider: str
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    # Every message the exchange produced, in order (assistant tool-call turns and
    # tool results of a web-search round trip included, then the final answer),
    # exactly as they must be stored to replay the conversation.
    messages: list[dict[str, Any]] = field(default_factory=list)
    retries: int = 0
    latency_ms: float = 0.0
    # Web pages the provider searched and reports (GLM's ``web_search`` results).
    search_results: list[dict[str, Any]] = field(default_factory=list)
    # Set by the registry when a fallback model answered: the model first chosen.
    fallback_from: str | None = None


@dataclass(slots=True)
class Delta:
    kind: Literal["text", "reasoning", "tool_call", "usage", "done"]
    text: str = ""
    tool_call: dict[str, Any] | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    # On "done": the complete response, assembled by the plugin.
    response: ChatResponse | None = None


@dataclass(frozen=True, slots=True)
class ExtractedFile:
    """A document the vendor turned into text: the upload's id, and the text as the
    vendor says to put it in a prompt (Moonshot: a system message of its own)."""

    file_id: str
    content: str


class Provider(ABC):
    """One model backend. Instances are shared by all calls; keep no per-call state."""

    name: str
    # The registry lets at most this many requests run against the provider at once.
    max_inflight: int = 16
    # Told to the user when a model of an unconfigured provider is asked for.
    setup_hint: str = ""

    @abstractmethod
    def configured(self) -> bool:
        """True when credentials (or a base URL) are present."""

    @abstractmethod
    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    @abstractmethod
    def stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        """Yield deltas as they arrive; the last one is ``Delta("done", response=...)``."""

    # The largest document the vendor's file extraction takes; 0: it extracts none.
    max_extract_bytes: int = 0

    async def list_models(self) -> list[str]:
        return []

    async def extract_file(self, data: bytes, filename: str) -> ExtractedFile:
        """Upload a document for text extraction; only for ``max_extract_bytes > 0``."""
        raise NotImplementedError(f"{self.name} does not extract text from files")

    async def aclose(self) -> None:
        return None
