"""The conversation store: what it keeps and the interface every backend offers.

Provider APIs are stateless, so exai keeps each conversation (a *thread*, named
by its ``continuation_id``) and replays it on every call. A thread belongs to the
principal that created it; to anyone else it does not exist. Each call appends
one *turn*: the messages it produced (the user input, any assistant tool-call
rounds and their results, the answer). A turn is stored under the key of the
request that made it, (owner, ``session_id``, ``request_id``), since the protocol
makes a ``request_id`` unique within its session only, together with the
request's *fingerprint* (its tool and arguments): the same request again gets
the turn already stored and never appends twice; another request under the
same key is refused with ``REQUEST_ID_REUSED``.

Two backends implement :class:`ConversationStore` and pass one contract suite:
SQLite (embedded, the default) and Postgres (shared by several daemons).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from exai.settings import Settings
from exai.store.artifact_types import Artifact, VendorUpload

if TYPE_CHECKING:
    from exai.store.session_turns import SessionKept, SessionTurn

__all__ = [
    "ANY_OWNER",
    "AnyOwner",
    "ConversationStore",
    "Owner",
    "StoreLimits",
    "StoredMessage",
    "Thread",
    "ThreadContext",
]


class AnyOwner:
    """The owner an operator acts as (command line, maintenance): sees every thread."""

    _instance: AnyOwner | None = None

    def __new__(cls) -> AnyOwner:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY_OWNER"


ANY_OWNER: Final = AnyOwner()
Owner = str | AnyOwner


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """The conversation settings a store enforces."""

    ttl_s: float = 30 * 24 * 3600.0
    max_turns: int = 10000
    fork_max_depth: int = 10
    fork_warn_depth: int = 7

    @classmethod
    def from_settings(cls, settings: Settings) -> StoreLimits:
        return cls(
            ttl_s=settings.conversation_ttl_s,
            max_turns=settings.conversation_max_turns,
            fork_max_depth=settings.fork_max_depth,
        )


@dataclass(frozen=True, slots=True)
class Thread:
    """One conversation. Times are Unix epoch seconds.

    A thread expires ``ttl_s`` after its last update (``expires_at``); ``depth``
    counts the forks between it and its root, and ``fork_point`` is the last
    ``seq`` of the parent that the fork copied.
    """

    id: str
    owner: str
    title: str | None
    created_at: float
    updated_at: float
    expires_at: float
    parent_id: str | None = None
    fork_point: int | None = None
    depth: int = 0
    deleted_at: float | None = None
    turns: int = 0
    last_seq: int = 0
    # An agent session's thread (exai.store.sessions): the model face it came through
    # (``openai``, ``anthropic``, ``responses``), the client that sent it (from its
    # User-Agent: "Claude Code 2.1.3"), the client's own session reference when it sent
    # one, and the thread it follows when the client rewrote its history (compaction).
    face: str | None = None
    client: str | None = None
    session_ref: str | None = None
    follows: str | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One provider message as stored, with what produced it.

    ``seq`` orders messages within the thread (1, 2, ...); ``turn`` numbers the
    append that stored it. ``reasoning`` is kept apart from ``content``; only a
    tool-call message's reasoning is loaded with the history, for the vendors that
    want it back. ``extra`` holds any other keys of the provider message (``name``,
    list-valued ``content``...) so that the message round-trips whole. The
    append's ``files`` are recorded on its first message and its ``usage`` on its
    last.
    """

    thread_id: str
    seq: int
    turn: int
    role: str
    content: str | None
    request_id: str
    created_at: float
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    reasoning: str | None = None
    model: str | None = None
    provider: str | None = None
    usage: dict[str, Any] | None = None
    files: list[str] | None = None
    extra: dict[str, Any] | None = None

    def provider_message(self) -> dict[str, Any]:
        """The message in the OpenAI chat format, as it is sent to a provider."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.extra:
            message.update(self.extra)
        if self.tool_calls is not None:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message


@dataclass(frozen=True, slots=True)
class ThreadContext:
    """What history assembly needs from a thread, loaded in one go.

    ``messages`` are the provider messages of the newest whole turns that could
    fit the character budget asked for, in order; ``turns`` and ``tokens`` give,
    for each of them, its turn number and its estimated cost in tokens (computed
    when it was stored). ``files`` are the paths referenced anywhere in the
    thread, most recently referenced first. Parallel lists rather than an object
    per message, because a long thread is loaded on every call.
    """

    thread: Thread
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


class ConversationStore(ABC):
    """Threads, their messages, per-thread tool state and artifacts.

    Every method taking an ``owner`` raises
    :class:`~exai.errors.ConversationNotFoundError` when the thread is unknown,
    expired, deleted, malformed or belongs to someone else, with a message that
    says what to do. ``ANY_OWNER`` is for operator tooling only.
    """

    limits: StoreLimits

    @abstractmethod
    async def create_thread(
        self,
        owner: str,
        title: str | None = None,
        parent_id: str | None = None,
        fork_point: int | None = None,
    ) -> Thread: ...

    @abstractmethod
    async def get_thread(self, thread_id: str, owner: Owner) -> Thread: ...

    @abstractmethod
    async def append(
        self,
        thread_id: str,
        owner: Owner,
        messages: Sequence[Mapping[str, Any]],
        *,
        request_id: str,
        session_id: str = "",
        fingerprint: str = "",
        model: str | None = None,
        provider: str | None = None,
        usage: Mapping[str, Any] | None = None,
        files: Sequence[str] | None = None,
    ) -> list[StoredMessage]:
        """Store one turn atomically, after every turn already stored.

        Idempotent on the request's key, (the thread's owner, ``session_id``,
        ``request_id``): when that key already stored a turn of this thread with
        the same ``fingerprint``, nothing is written and its stored messages are
        returned. When it stored a turn of another thread, or with another
        fingerprint, :class:`~exai.errors.RequestIdReusedError` is raised.
        Raises :class:`~exai.errors.ValidationError_` for a malformed message or
        when the thread holds ``max_turns`` turns.
        """

    @abstractmethod
    async def start_thread(
        self,
        owner: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        title: str | None = None,
        request_id: str,
        session_id: str = "",
        fingerprint: str = "",
        model: str | None = None,
        provider: str | None = None,
        usage: Mapping[str, Any] | None = None,
        files: Sequence[str] | None = None,
    ) -> tuple[Thread, list[StoredMessage]]:
        """Create a thread holding its first turn, in one transaction.

        What :meth:`create_thread` then :meth:`append` do, for the common case of
        a call that starts a conversation: one write instead of two, and never a
        thread without the turn that created it. Idempotent like :meth:`append`:
        when the request's key already stored a turn, that turn's thread and
        messages are returned and nothing is written (the same request retried
        after its answer was lost starts no second thread).
        """

    @abstractmethod
    async def find_turn(
        self, owner: str, request_id: str, *, session_id: str = "", fingerprint: str = ""
    ) -> tuple[Thread, list[StoredMessage]] | None:
        """The thread and messages of the turn this request already stored, or None.

        Lets a caller answer a retried request before doing any work for it.
        Raises :class:`~exai.errors.RequestIdReusedError` when the key stored a
        different request, and ``CONVERSATION_NOT_FOUND`` when the thread it
        stored in has since been deleted or has expired.
        """

    @abstractmethod
    async def messages(
        self, thread_id: str, owner: Owner, limit: int | None = None
    ) -> list[StoredMessage]:
        """Every message in order, or the newest ``limit`` of them."""

    @abstractmethod
    async def load_context(
        self,
        thread_id: str,
        owner: Owner,
        *,
        max_chars: int | None = None,
        family: str = "generic",
    ) -> ThreadContext:
        """The thread, its newest whole turns within ``max_chars``, and its files.

        Token costs are those of the tokenizer ``family`` (see
        :mod:`exai.store.tokens`). Cost depends on the turns returned, not on the
        length of the thread.
        """

    @abstractmethod
    async def list_threads(
        self,
        owner: Owner | None = None,
        *,
        include_deleted: bool = False,
        limit: int = 100,
        offset: int = 0,
        agent: bool | None = None,
        face: str | None = None,
        client: str | None = None,
    ) -> list[Thread]:
        """Threads, most recently updated first (expired ones only with deleted).

        ``owner`` None (or ``ANY_OWNER``) lists every principal's threads. ``agent``
        True keeps the agent sessions (threads the model faces kept), False the other
        threads; ``face`` keeps the sessions that came through that model face,
        ``client`` those whose client's name holds that text (any case).
        """

    @abstractmethod
    async def related_threads(self, thread_id: str, owner: Owner) -> list[Thread]:
        """The live threads that came from this one: its forks and the threads that
        follow it (an agent session whose client rewrote its history), oldest first."""

    @abstractmethod
    async def keep_session_turn(self, turn: SessionTurn) -> SessionKept:
        """Keep an answered model-face request as the next turn of the agent session it
        continues; see :mod:`exai.store.sessions`."""

    @abstractmethod
    async def delete(self, thread_id: str, owner: Owner) -> None:
        """Soft delete: the thread disappears now and is erased by :meth:`prune`."""

    @abstractmethod
    async def prune(self, now: float | None = None) -> int:
        """Erase deleted and expired threads with everything they hold; returns how many."""

    @abstractmethod
    async def fork(self, thread_id: str, owner: Owner, at_seq: int | None = None) -> Thread:
        """A new thread holding a copy of the messages up to ``at_seq`` (default: all).

        The fork belongs to the owner of the source thread. State and artifacts
        stay with the source.
        """

    @abstractmethod
    async def import_thread(self, thread: Thread, messages: Sequence[StoredMessage]) -> Thread:
        """Restore an exported thread exactly, ids and times included."""

    @abstractmethod
    async def get_state(self, thread_id: str, key: str) -> dict[str, Any] | None: ...

    @abstractmethod
    async def put_state(self, thread_id: str, key: str, value: Mapping[str, Any]) -> None: ...

    @abstractmethod
    async def put_artifact(
        self, thread_id: str, content: str, meta: Mapping[str, Any] | None = None
    ) -> str: ...

    @abstractmethod
    async def get_artifact(
        self,
        thread_id: str,
        artifact_id: str,
        owner: Owner,
        *,
        offset: int = 0,
        limit: int | None = None,
    ) -> Artifact:
        """The artifact's characters ``[offset, offset + limit)``."""

    @abstractmethod
    async def get_upload(self, owner: str, provider: str, sha256: str) -> VendorUpload | None:
        """The upload ``owner`` made of these bytes to ``provider``, or None.

        Only the owner's own uploads are found: the bytes are the principal's.
        """

    @abstractmethod
    async def put_upload(self, upload: VendorUpload) -> VendorUpload:
        """Keep ``upload``; when its key already holds one (a concurrent call
        uploaded the same file), the one kept first is returned and kept."""

    # --- the Responses API's stored responses (see exai.store.responses) ----

    @abstractmethod
    async def put_response(
        self,
        response_id: str,
        owner: str,
        messages: Sequence[Mapping[str, Any]],
        parent_id: str | None = None,
    ) -> None:
        """Keep a response: the messages it added to the conversation after
        ``parent_id``'s. The same id again keeps the first."""

    @abstractmethod
    async def response_messages(self, response_id: str, owner: str) -> list[dict[str, Any]]:
        """The whole conversation up to ``response_id``; ``ConversationNotFoundError``
        unless it is the owner's, unexpired, with every earlier response there."""

    @abstractmethod
    async def aclose(self) -> None: ...

    async def ping(self) -> None:
        """Raise if the database cannot answer a query (``/ready`` asks this)."""
        await self.list_threads(ANY_OWNER, limit=1)

    async def __aenter__(self) -> ConversationStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
