"""Sessions: who is connected, the calls they have in flight, and what finished.

A session outlives its WebSocket: a client that reconnects and says ``hello``
with the same ``session_id`` gets it back, with its running calls and the
results of recent ones. That is what makes a retry after a reconnect safe: a
``call_tool`` whose ``request_id`` already finished is answered from the replay
cache (:mod:`exai.daemon.replay`, shared by every session and bounded across
them), and one still running is attached to rather than started again.

With a Postgres store the registry also has a ``shared`` state
(:class:`exai.cluster.ClusterState`): sessions and finished results are noted
there (written in the background), and a session this daemon does not hold is
looked up there at ``hello``, so a client whose daemon died resumes on another.

Nothing here touches a socket; a session only holds a ``send`` callable for the
connection currently attached, which the connection layer swaps on resume.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from exai.auth import Principal
from exai.daemon.call import Call
from exai.daemon.replay import ReplayCache, ReplayEntry
from exai.errors import ExaiError, UnauthorizedError
from exai.limits import CapacityLimiter

__all__ = ["Session", "SessionRegistry"]


class Sender(Protocol):
    """How frames reach the connection a session is attached to (a FrameSender)."""

    async def __call__(self, frame: Any) -> None:
        """Send, waiting for room in the connection's buffer if there is none."""

    def post(self, frame: Any) -> None:
        """Send without waiting."""

    def now(self, frame: bytes) -> bool:
        """Send at once if the connection has room; False (nothing sent) if it has none."""


@dataclass(eq=False)
class Session:
    id: str
    principal: Principal
    limiter: CapacityLimiter
    results: ReplayCache  # the daemon's one replay cache; this session's entries in it
    send: Sender | None = None
    calls: dict[str, Call] = field(default_factory=dict)
    last_seen: float = field(default_factory=time.monotonic)
    connection: Any = None
    shared: Any = None  # exai.cluster.ClusterState, when several daemons share sessions
    # Where its calls come from, for the request log: the face ("ws", "mcp" for the MCP
    # shim and MCP over HTTP, "openai", "anthropic", "responses", "console", "job") and
    # the client's name as it gave it (a hello's client, a User-Agent).
    face: str = "ws"
    client: str | None = None

    async def deliver(self, frame: Any) -> None:
        """Send to whichever connection is attached now; dropped if none is."""
        send = self.send
        if send is not None:
            await send(frame)

    def deliver_now(self, frame: bytes) -> bool:
        """Send at once if the attached connection has room; False if it has none
        (nothing sent). With no connection attached the frame is dropped, as
        :meth:`deliver` drops it."""
        send = self.send
        return send is None or send.now(frame)

    def post(self, frame: Any) -> None:
        """:meth:`deliver` without waiting, for code that cannot await."""
        send = self.send
        if send is not None:
            send.post(frame)

    def remember(self, call: Call, result: bytes, now: float, error: ExaiError | None) -> None:
        """Keep ``result`` (the frame sent) for a retry of the same call, which ended
        with ``error`` (None: it succeeded)."""
        rid = call.request_id
        if self.shared is not None:  # other daemons compare retries against the digest itself
            fingerprint = call.fingerprint()
            self.results.put(self.id, rid, fingerprint, result, now)
            self.shared.note_result(self.id, self.principal.name, rid, fingerprint, result, error)
            return
        request = call.request if call.fingerprint_known is None else None
        known = None if request is not None else call.fingerprint()
        self.results.put(self.id, rid, known, result, now, request)

    def replay(self, request_id: str) -> ReplayEntry | None:
        """What the call ``request_id`` of this session answered, if it is still kept."""
        return self.results.get(self.id, request_id, time.monotonic())


class SessionRegistry:
    def __init__(
        self,
        make_limiter: Callable[[str], CapacityLimiter],
        idle_ttl_s: float,
        results: ReplayCache,
        *,
        shared: Any = None,
    ) -> None:
        """``shared``: the state shared with other daemons (exai.cluster.ClusterState)
        with a Postgres store, else None."""
        self._sessions: dict[str, Session] = {}
        self._make_limiter = make_limiter
        self.idle_ttl_s = idle_ttl_s
        self.results = results
        self.shared = shared

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def open(
        self, principal: Principal, session_id: str | None, *, send: Sender | None = None,
        face: str | None = None, client: str | None = None,
    ) -> tuple[Session, bool]:  # fmt: skip
        """Return ``(session, resumed)``; resuming another principal's session is refused.

        ``send``, ``face`` and ``client``, when given, are the attaching caller's (an
        in-process one: the WebSocket face attaches its connection after the hello)."""
        if session_id is not None:
            existing = self._sessions.get(session_id)
            if existing is not None:
                if existing.principal.name != principal.name:
                    raise UnauthorizedError("session belongs to another principal")
                existing.principal = principal  # a refreshed JWT may carry new scopes
                existing.last_seen = time.monotonic()
                if send is not None:
                    existing.send = send
                if face is not None:
                    existing.face, existing.client = face, client
                return existing, True
        sid = session_id or secrets.token_urlsafe(16)
        session = Session(id=sid, principal=principal, limiter=self._make_limiter(sid),
                          results=self.results, send=send, face=face or "ws",
                          client=client)  # fmt: skip
        self._sessions[sid] = session
        return session, False

    async def open_shared(
        self, principal: Principal, session_id: str | None
    ) -> tuple[Session, bool]:
        """:meth:`open`, also resuming a session another daemon holds or held.

        Only a ``session_id`` this daemon does not hold costs a query: its owner
        must be ``principal``, and the results it kept go into the replay cache.
        """
        shared = self.shared
        if shared is None:
            return self.open(principal, session_id)
        found = None
        if session_id is not None and session_id not in self._sessions:
            found = await shared.load_session(session_id)
            if found is not None and found.owner != principal.name:
                raise UnauthorizedError("session belongs to another principal")
        session, resumed = self.open(principal, session_id)
        if resumed:  # held here, or opened by another hello while we asked
            return session, True
        # Only sessions opened by a hello are shared: an in-process client's
        # (the HTTP faces') lives for one request and is never resumed.
        session.shared = shared
        shared.note_session(session.id, principal.name)
        if found is None:
            return session, False
        now = time.monotonic()
        for r in found.results:
            self.results.put(session.id, r.request_id, r.fingerprint, r.result, now - r.age_s)
        shared.stats["resumed"] += 1
        return session, True

    def discard(self, session_id: str) -> None:
        """Forget a session at once, and what it kept (an in-process client's, when its
        request is done)."""
        if self._sessions.pop(session_id, None) is not None:
            self.results.forget(session_id)

    def sweep(self, now: float) -> int:
        """Age out replay entries; forget detached, idle sessions with nothing running
        and everything they kept. Return how many sessions went."""
        self.results.expire(now)
        gone = 0
        for sid, session in list(self._sessions.items()):
            if (
                session.send is None
                and not session.calls
                and now - session.last_seen > (self.idle_ttl_s)
            ):
                del self._sessions[sid]
                self.results.forget(sid)
                gone += 1
        return gone
