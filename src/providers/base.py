"""The provider plugin interface: what every model backend implements.

Messages are plain dicts in the OpenAI chat format (``role``, ``content``, and
``tool_calls`` / ``tool_call_id`` where they apply); reasoning text never goes in
``content`` and is returned apart. A provider raises only :mod:`exai.errors`
exceptions (``RateLimitedError``, ``ContextTooLongError``, ``ProviderError``...)
with ``retryable`` set truthfully; SDK exceptions never escape a plugin.

A request may carry the caller's own function tools (``tools``, OpenAI shape) and
sampling parameters; a round in which the model calls one of those tools ends the
exchange, and the calls go back to the caller on the response (``tool_calls``,
``finish_reason="tool_calls"``) to run and answer in its next request. What exai
changed about a request to serve it (a parameter the vendor sets itself, thinking
switched off for a forced tool choice...) is listed in ``ChatResponse.notes``;
what it cannot serve is a ``ValidationError_`` naming the parameter.

Plugins are found through the ``exai.providers`` entry-point group; each entry
point names a factory ``(settings) -> Provider``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from exai.protocol import EFFORTS
from exai.providers.reasoning import ReplayRule

__all__ = [
    "EFFORTS",
    "ChatRequest",
    "ChatResponse",
    "Delta",
    "ExtractedFile",
    "ParamSupport",
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
    # Searches the vendor ran for the answer and bills per call (Moonshot's
    # ``$web_search``, Z.ai's ``web_search`` tool), on top of the tokens.
    web_searches: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.web_searches += other.web_searches

    @property
    def cache_hit(self) -> bool:
        return self.cached_prompt_tokens > 0

    def metadata(self) -> dict[str, Any]:
        """The result metadata keys for this usage: ``usage`` and ``cache_hit``."""
        return {"usage": self.as_dict(), "cache_hit": self.cache_hit}

    def as_dict(self) -> dict[str, int]:
        out = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.web_searches:
            out["web_searches"] = self.web_searches
        return out


@dataclass(slots=True)
class ChatRequest:
    model: str  # the provider's own model id, already resolved from aliases
    messages: list[dict[str, Any]]
    temperature: float | None = None
    max_output_tokens: int | None = None
    thinking: bool | None = None  # None: the model's default
    # How hard the model reasons. Asked: one of EFFORTS (the faces' and tools'
    # vocabulary); once fitted to a model (exai.providers.params), the level that
    # model's API takes, or None when it has no such knob or none was asked.
    reasoning_effort: str | None = None
    # Whether the model reasons on this call, as the catalogue knows it (None: not
    # known). Decides which stored reasoning is sent back with the history.
    thinks: bool | None = None
    web_search: bool = False
    request_id: str | None = None  # for logs and audit correlation
    # A reply cut by the output limit is continued until it is whole; off when the
    # caller set max_output_tokens to get a short reply, and a cut one is the answer.
    continue_cut: bool = True
    # The caller's function tools, OpenAI shape ({"type": "function", "function":
    # {"name", "description", "parameters"}}), and how the model may use them:
    # "auto", "none", "required" or {"type": "function", "function": {"name": ...}}.
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stop: list[str] | None = None
    top_p: float | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None  # {"type": "json_object"}, ...
    # The messages are the caller's own (a stateless request): every one of them
    # reaches the model, and exai puts back the reasoning of tool rounds it made
    # (see exai.providers.tool_reasoning). False: exai's stored thread, replayed
    # under exai.providers.reasoning's rule.
    client_history: bool = False
    owner: str | None = None  # the principal; the reasoning exai keeps is theirs alone
    # The models the caller may use (None: every model): no fallback goes outside them.
    allowed_models: frozenset[str] | None = None
    # Stream the arguments of tool calls as the model writes them, where the vendor
    # streams them only when asked (Z.ai's tool_stream); set from the catalogue.
    tool_stream: bool = False
    # Every earlier assistant message's reasoning goes back with the history
    # (Moonshot's Preserved Thinking); set from the catalogue.
    preserved_thinking: bool = False


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
    # The caller's tools the model called (OpenAI shape: id, type "function",
    # function.name, function.arguments as a JSON string), when finish_reason is
    # "tool_calls"; the caller runs them and sends the results in its next request.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # What exai adapted or left out to serve the request, for the caller to see:
    # {"param": "tool_choice", "message": "..."}.
    notes: list[dict[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class Delta:
    """One piece of a streamed answer.

    - ``text``, ``reasoning``: ``text`` holds the next piece.
    - ``tool_call``: the model started calling one of the caller's tools: ``index``
      (0, 1... within the answer) and ``tool_call`` with its ``id``, ``type`` and
      ``function.name`` (``function.arguments`` empty); its arguments follow.
    - ``tool_arguments``: the next piece of the arguments (a JSON string once
      joined) of the call at ``index``, in ``text``.
    - ``usage``: the answer's usage, after everything else.
    - ``done``: the last delta, with the whole ``response``.
    """

    kind: Literal["text", "reasoning", "tool_call", "tool_arguments", "usage", "done"]
    text: str = ""
    tool_call: dict[str, Any] | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    # On "done": the complete response, assembled by the plugin.
    response: ChatResponse | None = None
    index: int | None = None  # of the tool call, on "tool_call" and "tool_arguments"


@dataclass(frozen=True, slots=True)
class ParamSupport:
    """Which request parameters a vendor's API takes, as its documentation says.

    The registry checks a request against it before anything is sent (see
    :mod:`exai.providers.params`); a plugin sends only what passed. The defaults
    are OpenAI's own API.
    """

    # tool_choice values taken: "auto", "none", "required", "function" (a named one).
    tool_choice: frozenset[str] = frozenset({"auto", "none", "required", "function"})
    # The same, while the model thinks (None: no difference).
    tool_choice_thinking: frozenset[str] | None = None
    parallel_tool_calls: bool = True  # the API takes the parameter
    seed: bool = True
    max_stop: int = 4  # stop sequences at most
    max_stop_bytes: int | None = None  # each one at most, in UTF-8
    response_formats: frozenset[str] = frozenset({"text", "json_object", "json_schema"})
    # The vendor's web search works while the model thinks (Moonshot's does not: "thinking
    # must be disabled when $web_search is used").
    web_search_thinking: bool = True


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
    # What the vendor's API takes of the caller's parameters.
    params: ParamSupport = ParamSupport()

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

    def replay_rule(self, request: ChatRequest) -> ReplayRule:
        """What the vendor accepts of reasoning and tool rounds in a request's history
        (see :mod:`exai.providers.reasoning`); by default, none of the reasoning."""
        return ReplayRule()

    async def extract_file(self, data: bytes, filename: str) -> ExtractedFile:
        """Upload a document for text extraction; only for ``max_extract_bytes > 0``."""
        raise NotImplementedError(f"{self.name} does not extract text from files")

    async def aclose(self) -> None:
        return None
