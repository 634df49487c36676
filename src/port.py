"""The narrow port every face calls the core through.

A face translates: the WebSocket server, MCP over stdio and HTTP, the model
faces (OpenAI chat completions, Anthropic Messages, OpenAI Responses), the
console and the job runner each turn their own wire format into calls of
this interface and its answers back into their format. None of them sees the
daemon's services, registry, dispatcher or sessions; the composition root
(:mod:`exai.app`) hands each face the :class:`Port` the core implements
(:class:`exai.daemon.core.Core`).

What a face may do:

- **authenticate** a credential, with the login throttle every face shares, and
  ask later whether the credential a principal presented still grants it
  anything (the job runner, before each run of a job);
- **call a tool as a principal**, through a :class:`Caller` (deadline,
  progress, text chunks, structured model events, cancel), or, for the
  WebSocket face, which carries the protocol's own sessions, by submitting
  frames to a :class:`SessionHandle` it opened;
- **read** what a face needs: the tools a principal may call, their schemas, the
  models, readiness, counters, and for the console a principal's own threads, jobs,
  memories and spend (an operator's: everyone's, the audit trail, health, settings);
- **keep** the console's sign-ins where every daemon on one store finds them
  (:class:`SignInStore`).

This module holds only interfaces and depends on nothing above the foundation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

if TYPE_CHECKING:
    from exai.admission import Admission
    from exai.auth import Authenticator, Credential, Principal
    from exai.keys import KeyAdmin
    from exai.metrics import DaemonMetrics
    from exai.protocol import (
        CallToolFrame,
        CallToolResult,
        ProgressFrame,
        StreamChunk,
        StreamEvent,
        ToolInfo,
    )
    from exai.settings import Settings

__all__ = [
    "REQUEST_LOG_FILTERS",
    "Caller",
    "KeptReasoning",
    "LimitsAdmin",
    "Port",
    "Reads",
    "SessionHandle",
    "SignInRow",
    "SignInStore",
]


# The columns :meth:`Reads.request_log` filters by, each an exact match (besides the
# time range, ``since`` and ``until``).
REQUEST_LOG_FILTERS: Final = (
    "principal", "key_id", "face", "client", "tool", "model_asked", "model", "status",
    "error_code", "trace_id", "session_id", "request_id", "thread_id",
)  # fmt: skip


class SessionHandle(Protocol):
    """A protocol session as a face holds it: who it is, and where its frames go."""

    id: str
    principal: Principal
    # The face's writer for the connection attached now (None: detached); the core
    # delivers the session's frames through it.
    send: Any
    connection: Any
    # Where its calls come from, for the request log: the face and the client's name.
    face: str
    client: str | None

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
        on_event: Callable[[StreamEvent], Any] | None = None,
        roots: list[str] | None = None,
    ) -> CallToolResult:
        """Run a tool; ``on_event`` takes model events as they stream (model faces)."""
        ...

    async def cancel(self, request_id: str) -> None: ...

    async def list_tools(self) -> list[ToolInfo]: ...

    def close(self) -> None:
        """Detach; calls still running are cancelled."""


class Reads(Protocol):
    """Read-only queries a face needs beside tool calls.

    Every query about a principal's data takes the principal and answers with
    its own rows only; another principal's thread, job or memory is as absent
    as one that never existed. The operator's queries raise ``FORBIDDEN`` for a
    principal without the admin scope (:func:`exai.auth.is_admin`). Answers are
    JSON-ready data (times in epoch seconds, amounts as decimal strings).
    """

    def models(self, principal: Principal | None = None) -> dict[str, Any]:
        """The model catalogue as the faces list it: ``{"models": [...], "auto": name}``;
        for ``principal``, only the models it may use."""
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

    # --- a principal's own (the console) -------------------------------------------

    async def threads(
        self, principal: Principal, *, query: str = "", limit: int = 50, offset: int = 0,
        kind: str = "", client: str = "", costs: bool = False,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The principal's live threads, most recently updated first; ``query`` keeps
        those whose title or text contains it, ``kind`` ``"agent"`` the agent sessions
        (threads with a ``face``) and ``"chat"`` the others, ``client`` the agent
        sessions whose client's name contains it (any case). Each thread carries its
        ``face``, ``client``, ``session_ref`` and ``follows`` (None for a chat thread)
        and, with ``costs``, its ``cost`` (``{currency: amount}``, the sum of its
        turns'; a query per thread, for a page of tens)."""
        ...

    async def thread(
        self, principal: Principal, thread_id: str, *, max_messages: int = 400,
        details: bool = True,
    ) -> dict[str, Any] | None:  # fmt: skip
        """One thread, or None: ``{"thread": {...}}`` alone without ``details``; with
        them its newest whole turns within ``max_messages`` messages (``complete``
        when they start at the first), each turn's cost (``costs``, by its first
        seq) and trace (``traces``), the thread's ``cost``, and its ``lineage``: the
        ``parent`` and the thread it ``follows`` (``{"id", "gone": True}`` when no
        longer kept), and the ``followers`` and ``forks`` found among the principal's
        200 most recently updated threads."""
        ...

    async def thread_export(self, principal: Principal, thread_id: str) -> str | None:
        """The thread as exai's JSONL export (``exai conversations export``), or None."""
        ...

    async def jobs(self, principal: Principal) -> list[dict[str, Any]]:
        """The principal's scheduled jobs (empty when jobs are off)."""
        ...

    async def job(self, principal: Principal, job_id: str) -> dict[str, Any] | None:
        """One job with its recent runs and notifications, or None."""
        ...

    async def memories(
        self, principal: Principal, *, limit: int = 50, offset: int = 0
    ) -> dict[str, Any]:
        """``{"memories": [...], "total": n, "enabled": bool}``, most recently updated first."""
        ...

    async def memory(self, principal: Principal, memory_id: str) -> dict[str, Any] | None:
        """One of the principal's memories, or None."""
        ...

    async def spend(self, principal: Principal, *, days: int = 30) -> dict[str, Any]:
        """The principal's cost per day, model and tool over the last ``days``, and
        its budget: amount, spent and left in the current period."""
        ...

    # --- the operator's (admin scope) ------------------------------------------------

    def is_admin(self, principal: Principal) -> bool:
        """Whether the principal has the operator's view."""
        ...

    async def spend_all(self, principal: Principal, *, days: int = 30) -> dict[str, Any]:
        """Every principal's cost and budget over the last ``days``."""
        ...

    async def usage(
        self, principal: Principal, *, days: int = 30, since: str = "", until: str = "",
        split: str = "model", everyone: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Calls, tokens and cost from the daily usage sums over whole UTC days: the last
        ``days`` (up to today), or ``since``/``until`` dates (``until`` not included).
        ``{"first_day", "end_day"`` (days since the epoch), ``"days"`` (per day, split by
        ``split``: ``model`` or ``face``), ``"keys"``, ``"models"``, ``"faces"``, and with
        ``everyone`` ``"principals"}``, each as :func:`exai.accounting.report.sums_report`
        makes it. ``everyone`` is the operator's view (``FORBIDDEN`` to anyone else);
        without it, only the principal's own calls. A period that is not whole days, or
        longer than 366, is ``VALIDATION_ERROR``."""
        ...

    async def request_log(
        self, principal: Principal, filters: dict[str, Any], *, before: str = "",
        after_id: int | None = None, limit: int = 50,
    ) -> dict[str, Any]:  # fmt: skip
        """One page of the request log (one row per call), newest first: ``{"rows",
        "next" (the cursor of the next page, None at the end), "top" (the highest row id,
        where a live tail starts), "filters"}``. ``filters`` are exact matches by column
        (:data:`REQUEST_LOG_FILTERS`) and ``since``/``until``; ``before``
        a cursor; ``after_id`` asks only for rows written after that row (a live tail)."""
        ...

    async def request_call(self, principal: Principal, row_id: int) -> dict[str, Any] | None:
        """One call of the request log with its audit events (None: the trail is off)
        and the turn it stored (``{"thread_id", "seq"}``), or None."""
        ...

    async def audit_events(
        self, principal: Principal, *, kind: str = "", who: str = "", text: str = "",
        limit: int = 100, before: str = "",
    ) -> dict[str, Any]:  # fmt: skip
        """The newest audit events matching the filters, newest first, from the local
        outbox (shipped or not)."""
        ...

    async def health(self, principal: Principal) -> dict[str, Any]:
        """Readiness of each dependency (providers, store, audit shipping) and the
        core's counters (sessions, calls in flight)."""
        ...

    def settings_view(self, principal: Principal) -> dict[str, Any]:
        """The settings in effect, secrets and URL credentials masked."""
        ...


# The rows the shared store keeps for the core: a tool round's reasoning (written by
# exai.cluster.reasoning for exai.providers.tool_reasoning, kept by exai.store.reasoning)
# and a console sign-in. Here, below both, so each side uses the one type.
class KeptReasoning(NamedTuple):
    """One round's reasoning as the shared store keeps it."""

    key: bytes
    owner: str
    reasoning: str
    size: int  # bytes counted against the owner's budget
    stored_at: float
    expires_at: float


class SignInRow(NamedTuple):
    id_hash: str
    principal: str  # JSON
    csrf: str
    created_at: float
    expires_at: float
    flashes: str  # JSON list of [kind, text]


class SignInStore(Protocol):
    """Where the console's sign-ins outlive one daemon's memory: the conversation
    store (rows keyed by a digest of the cookie)."""

    # Other daemons use it too: what one daemon's memory holds may have been signed
    # out elsewhere, so the console checks it on every request.
    shared: bool

    async def put_sign_in(self, row: SignInRow) -> None: ...

    async def sign_in_row(self, id_hash: str) -> SignInRow | None: ...

    async def set_sign_in_flashes(self, id_hash: str, flashes: str) -> None: ...

    async def delete_sign_in(self, id_hash: str) -> None: ...


class LimitsAdmin(Protocol):
    """The operator's run-time limits per principal (docs/cost.md): ``/admin/limits``
    calls it, after checking that the caller is an operator. Bad input raises
    ``ValueError``."""

    async def list_limits(self) -> dict[str, Any]:
        """``{"defaults": {...}, "principals": [{principal, budget, rate_per_min,
        models, updated_at, updated_by}]}``."""
        ...

    async def set_limits(self, principal: str, changes: Mapping[str, Any], *,
                         by: str) -> dict[str, Any]:  # fmt: skip
        """Change ``budget``, ``rate`` or ``models`` (None: back to the default)."""
        ...

    async def clear_limits(self, principal: str, *, by: str) -> bool: ...


class Port(Protocol):
    """The core as a face sees it."""

    settings: Settings
    auth: Authenticator
    admission: Admission  # login throttle and the unauthenticated-connection allowance
    metrics: DaemonMetrics
    reads: Reads
    started_at: float
    # Where people reach the HTTP listener (EXAI_PUBLIC_URL, else the listener's own
    # address once it listens; None without one): links in notifications point here.
    public_url: str | None
    # The console's sign-ins beyond this daemon's memory; None keeps them there only.
    sign_ins: SignInStore | None
    # The operator's keys (docs/keys.md); None without a SQL store. Faces check that
    # the principal is an operator before they call it.
    key_admin: KeyAdmin | None
    # The operator's run-time limits (docs/cost.md); None without a SQL store.
    limits_admin: LimitsAdmin | None

    @property
    def draining(self) -> bool:
        """True once the daemon is shutting down: new calls are refused."""
        ...

    def emit(self, kind: str, /, **fields: Any) -> None:
        """An audit event (never waits)."""

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a fire-and-forget coroutine the core keeps a reference to."""

    def credential_problem(
        self, owner: str, credential: Credential | None, now: float
    ) -> str | None:
        """Why ``credential`` (recorded when ``owner`` presented it) no longer grants
        ``owner``'s calls on this daemon, as configured now: a JWT past its expiry, a
        token no longer configured. None while it does, or when none was recorded."""
        ...

    # --- calling -------------------------------------------------------------

    def connect(
        self, principal: Principal, session_id: str | None = None, *, face: str = "local",
        client: str | None = None,
    ) -> Caller:  # fmt: skip
        """An in-process session for ``principal``; its calls are logged as coming from
        ``face`` and ``client`` (the client's name, when the face knows it)."""
        ...

    async def open_session(
        self, principal: Principal, session_id: str | None
    ) -> tuple[SessionHandle, bool]:
        """Open or resume a protocol session: ``(session, resumed)``."""
        ...

    def submit(self, session: SessionHandle, frame: CallToolFrame, raw: str | None = None) -> Any:
        """Admit a ``call_tool`` of ``session`` and start it, or answer it at once.

        Returns the call's task (an ``asyncio.Task``) when it was started, else None:
        a face may wait on it (the WebSocket face ends its span when it is done)."""

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
