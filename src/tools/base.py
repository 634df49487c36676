"""What a tool is, and what it is handed for one call.

A tool declares a pydantic ``Input`` model (its ``inputSchema`` is generated from
it), a terse ``description`` and an async ``run(arguments, context)``. Tools are
stateless singletons: everything a call needs arrives in its :class:`ToolContext`,
and anything that must outlive the call goes to the conversation store.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from exai.errors import OverCapacityError
from exai.files.roots import effective_roots, is_loopback
from exai.protocol import StreamEvent

if TYPE_CHECKING:
    from exai.accounting.ledger import Charge
    from exai.auth import Principal
    from exai.settings import Settings

__all__ = ["NullAudit", "Services", "Tool", "ToolContext", "ToolInput", "ToolResult"]

Profile = Literal["lean", "standard", "full"]
PROFILE_ORDER: dict[str, int] = {"lean": 0, "standard": 1, "full": 2}


class ToolInput(BaseModel):
    """Base for tool inputs: unknown arguments are an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class NullAudit:
    """The audit sink used when the audit trail is off."""

    def emit(self, kind: str, /, **fields: Any) -> None:
        return None


@dataclass
class Services:
    """The long-lived things tools may use. Built once by the daemon."""

    settings: Settings
    audit: Any = field(default_factory=NullAudit)
    providers: Any = None  # exai.providers.ProviderRegistry
    store: Any = None  # exai.store.ConversationStore
    stats: Callable[[], dict[str, Any]] | None = None  # daemon snapshot for `status`
    registry: Any = None  # the ToolRegistry, for tools that describe the others
    ledger: Any = None  # exai.accounting.ledger.Ledger (spend, budgets, cost rows)
    memory: Any = None  # exai.memory.MemoryService, when EXAI_MEMORY_ENABLED
    jobs: Any = None  # exai.jobs.service.JobService, when EXAI_JOBS_ENABLED
    # exai.tools.session_keeper.SessionKeeper: keeps model-face requests as agent sessions
    sessions: Any = None


@dataclass(slots=True)
class ToolContext:
    """Everything one call may know. Created per call; never stored on a tool."""

    request_id: str
    session_id: str
    principal: Principal
    tool: str
    deadline: float  # time.monotonic() value
    services: Services
    log: Any
    stream_requested: bool = False
    progress_cb: Callable[[str, float | None, float | None], Awaitable[None]] | None = None
    stream_cb: Callable[[str], Awaitable[None]] | None = None
    # Structured stream events for in-process faces that asked for them (the model
    # faces); None for WebSocket clients, who get the text as stream_chunk frames.
    event_cb: Callable[[StreamEvent], Awaitable[None]] | None = None
    provider_calls: int = 0  # model calls made so far by this call
    # Gives the digest of the call's tool and arguments: with (principal,
    # session_id, request_id), what tells a retry of this call from another call
    # under the same id. A function, as most calls never need it.
    fingerprint_of: Callable[[], str] | None = None
    client_roots: Sequence[str] = ()  # the calling IDE's workspace roots, if it declared any
    # Every model call made by this call, with its usage and cost (see ask_model).
    # A list shared by copies of the context, so a tool's parallel calls all land here.
    charges: list[Charge] = field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        return self.fingerprint_of() if self.fingerprint_of is not None else ""

    @property
    def roots(self) -> list[str]:
        """The directories this call may read files from (see :mod:`exai.files.roots`)."""
        settings = self.settings
        return effective_roots(
            settings.allowed_roots,
            self.client_roots,
            ceiling="allowed_roots" in settings.model_fields_set,
            loopback=is_loopback(settings.ws_host),
        )

    @property
    def allowed_models(self) -> frozenset[str] | None:
        """The models this call may use: its key's and the operator's limits together
        (see :mod:`exai.accounting.limits`); None: every model."""
        limits = getattr(self.services.ledger, "limits", None)
        if limits is not None:
            models: frozenset[str] | None = limits.models_for(self.principal)
            return models
        return self.principal.models

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    async def progress(
        self, message: str, progress: float | None = None, total: float | None = None
    ) -> None:
        if self.progress_cb is not None:
            await self.progress_cb(message, progress, total)

    async def stream(self, text: str) -> None:
        """Send a ``stream_chunk``; a no-op unless the client asked to stream."""
        if self.stream_requested and self.stream_cb is not None and text:
            await self.stream_cb(text)

    async def event(self, event: StreamEvent) -> None:
        """Send a structured stream event; a no-op unless the caller asked for events."""
        if self.event_cb is not None:
            await self.event_cb(event)

    def count_provider_call(self) -> None:
        """Count one model call, refusing any beyond ``max_provider_calls_per_request``.

        A hard ceiling per request, so that no tool (or loop inside one) can turn
        a single call into an unbounded number of paid provider requests.
        """
        limit = self.settings.max_provider_calls_per_request
        if self.provider_calls >= limit:
            raise OverCapacityError(
                f"{self.tool} would exceed the limit of {limit} provider calls per request "
                "(EXAI_MAX_PROVIDER_CALLS_PER_REQUEST)",
                retryable=False,
                details={"limit": limit, "setting": "EXAI_MAX_PROVIDER_CALLS_PER_REQUEST"},
            )
        self.provider_calls += 1

    @property
    def settings(self) -> Settings:
        return self.services.settings


@dataclass
class ToolResult:
    text: str | list[str]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    # The smallest profile that includes this tool.
    profile: ClassVar[Profile] = "standard"
    # Kept whatever the profile and the allow/deny lists say.
    always_on: ClassVar[bool] = False
    # In ``list_tools`` (and so in every MCP client's tool list). An unlisted tool
    # is still called by name, with the same scopes, limits and audit: it serves a
    # face of the daemon (the OpenAI-compatible endpoint) rather than a model.
    listed: ClassVar[bool] = True
    # A result over EXAI_MAX_RESULT_TOKENS is stored as an artifact and replaced by
    # its beginning (see exai.tools.artifacts). Off for the artifact pages
    # themselves, and for callers that take long answers whole and store nothing.
    spill_results: ClassVar[bool] = True

    _schema: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        if cls.__dict__.get("_schema") is None:
            cls._schema = _without_titles(cls.Input.model_json_schema())
        assert cls._schema is not None
        return cls._schema

    async def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        raise NotImplementedError


# Keys whose values are data, not schemas: a "title" inside them is kept.
_DATA_KEYS = frozenset({"default", "const", "enum", "examples"})


def _without_titles(node: Any) -> Any:
    """The schema without pydantic's generated titles: they repeat the names, and
    every client pays for them in each tools/list."""
    if isinstance(node, dict):
        return {
            key: value if key in _DATA_KEYS else _without_titles(value)
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    return node
