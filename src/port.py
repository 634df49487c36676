"""The narrow port every face calls the core through.

A face translates: the WebSocket server, MCP over stdio and HTTP, the model
faces (OpenAI chat completions, Anthropic Messages, OpenAI Responses), the
console and the job runner each turn their own wire format into calls of
this interface and its answers back into their format. None of them sees the
daemon's services, registry, dispatcher or sessions; the composition root
(:mod:`exai.app`) hands each face the :class:`Port` the core implements
(:class:`exai.daemon.core.Core`).

What a face may do:

- **authenticate** a credential, with the login throttle every face shares;
- **call a tool as a principal**, through a :class:`Caller` (deadline,
  progress, text chunks, structured model events, cancel), or, for the
  WebSocket face, which carries the protocol's own sessions, by submitting
  frames to a :class:`SessionHandle` it opened;
- **read** what a face needs to describe the core: the tools a principal may
  call, one tool's input schema, the models, readiness and counters.

This module holds only interfaces and depends on nothing above the foundation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from exai.admission import Admission
    from exai.auth import Authenticator, Principal
    from exai.metrics import DaemonMetrics
    from exai.protocol import (
        CallToolFrame,
        CallToolResult,
        ProgressFrame,
        StreamChunk,
        ToolInfo,
    )
    from exai.settings import Settings

__all__ = ["Caller", "Port", "Reads", "SessionHandle"]


class SessionHandle(Protocol):
    """A protocol session as a face holds it: who it is, and where its frames go."""

    id: str
    principal: Principal
    # The face's writer for the connection attached now (None: detached); the core
    # delivers the session's frames through it.
    send: Any
    connection: Any

    def post(self, frame: Any) -> None:
        """Send a frame to the attached connection without waiting."""

    def replay(self, request_id: str) -> Any:
        """The kept result of the finished call ``request_id``, if any."""


class Caller(Protocol):
    """One principal's calls into the core, in process (an in-process session)."""

    session_id: str
    principal: Principal

    def new_request_id(self) -> str: ...

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        request_id: str | None = None,
        timeout_s: float | None = None,
        stream: bool = False,
        on_progress: Callable[[ProgressFrame], Any] | None = None,
        on_chunk: Callable[[StreamChunk], Any] | None = None,
        on_event: Callable[[Any], Any] | None = None,
        roots: list[str] | None = None,
    ) -> CallToolResult:
        """Run a tool; ``on_event`` asks for structured model events (provider
        deltas) instead of text chunks, for the model faces."""
        ...

    async def cancel(self, request_id: str) -> None: ...

    async def list_tools(self) -> list[ToolInfo]: ...

    def close(self) -> None:
        """Detach; calls still running are cancelled."""


class Reads(Protocol):
    """Read-only queries a face needs beside tool calls."""

    def models(self) -> dict[str, Any]:
        """The model catalogue as the faces list it: ``{"models": [...], "auto": name}``."""
        ...

    async def artifact_text(self, thread_id: str, artifact_id: str, principal: str) -> str | None:
        """The whole text of a stored artifact of the principal's thread, or None."""
        ...

    def count_tokens(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> int:
        """exai's estimate (never under) of the prompt tokens of ``messages`` and
        ``tools`` for the model ``model`` names (a name, an alias or ``auto``)."""
        ...


class Port(Protocol):
    """The core as a face sees it."""

    settings: Settings
    auth: Authenticator
    admission: Admission  # login throttle and the unauthenticated-connection allowance
    metrics: DaemonMetrics
    reads: Reads
    started_at: float

    @property
    def draining(self) -> bool:
        """True once the daemon is shutting down: new calls are refused."""
        ...

    def emit(self, kind: str, /, **fields: Any) -> None:
        """An audit event (never waits)."""

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a fire-and-forget coroutine the core keeps a reference to."""

    # --- calling -------------------------------------------------------------

    def connect(self, principal: Principal, session_id: str | None = None) -> Caller:
        """An in-process session for ``principal``."""
        ...

    async def open_session(
        self, principal: Principal, session_id: str | None
    ) -> tuple[SessionHandle, bool]:
        """Open or resume a protocol session: ``(session, resumed)``."""
        ...

    def submit(self, session: SessionHandle, frame: CallToolFrame, raw: str | None = None) -> None:
        """Admit a ``call_tool`` of ``session`` and start it, or answer it at once."""

    def cancel(self, session: SessionHandle, request_id: str) -> bool:
        """Cancel a running call; False if none is running under that id."""
        ...

    # --- describing ------------------------------------------------------------

    def tools(self, principal: Principal | None = None) -> list[ToolInfo]:
        """The listed tools, only those ``principal`` may call when one is given."""
        ...

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's input schema (listed or not), or None if there is no such tool."""
        ...

    def readiness(self) -> Awaitable[tuple[bool, dict[str, Any]]]:
        """Whether every dependency answers, and what each said."""
        ...

    def stats(self) -> dict[str, Any]:
        """A snapshot of the core's counters (sessions, calls in flight, audit...)."""
        ...
