"""Who owns each MCP session on ``/mcp``, how many each principal holds, and their streams.

The SDK's session manager keeps the sessions themselves; this book keeps what
exai decides about them, with no I/O and an injected clock, so the rules are
tested without a server:

- **Ownership.** A session belongs to the principal whose request opened it. Any
  request that names it with another principal's credentials is answered as if
  it did not exist (404), whether a call, a GET stream or a DELETE.
- **Caps.** A principal may hold ``per_principal`` sessions, the daemon
  ``total``; an opening request beyond either is refused before the SDK
  creates anything. Openings still being answered count too, so a burst of
  ``initialize`` requests cannot step past the cap between check and answer.
- **Idle expiry.** The SDK ends a session that has had no request in flight for
  ``idle_s``. The book counts the requests it passes on and forgets a session
  once it has been idle that long since its last request *ended here*, which is
  never before the SDK's own deadline: a session is counted at least as long
  as the SDK keeps it, never less.
- **One standalone stream** (``GET``) per session at a time; the SDK checks this
  only once its stream is set up, so concurrent GETs all got through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Refusal", "SessionBook"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an opening request is refused; ``mine``: the caller's own cap (not the daemon's)."""

    message: str
    mine: bool


@dataclass(slots=True)
class _Session:
    owner: str
    in_flight: int = 0
    idle_since: float = 0.0
    streaming: bool = False


class SessionBook:
    def __init__(
        self,
        *,
        per_principal: int,
        total: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_principal = per_principal
        self.total = total
        self.idle_s = idle_s
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._by_owner: dict[str, set[str]] = {}
        self._opening: dict[str, int] = {}  # owner -> opening requests being answered
        self.refused = 0  # openings refused at a cap since start

    # --- opening ----------------------------------------------------------------

    def reserve(self, owner: str) -> Refusal | None:
        """Count an opening request of ``owner``; or say why it is refused."""
        self._expire(self._by_owner.get(owner, set()))
        mine = len(self._by_owner.get(owner, ())) + self._opening.get(owner, 0)
        if mine >= self.per_principal:
            self.refused += 1
            return Refusal(
                f"{owner!r} has {mine} MCP sessions open, the most one principal may "
                f"(EXAI_MCP_MAX_SESSIONS_PER_PRINCIPAL={self.per_principal}); end one with "
                f"DELETE /mcp, or wait until an idle one expires "
                f"(EXAI_MCP_SESSION_IDLE_S={self.idle_s:g})",
                mine=True,
            )
        if self._count() >= self.total:
            self._expire(list(self._sessions))
            if self._count() >= self.total:
                self.refused += 1
                return Refusal(
                    f"the daemon has {self._count()} MCP sessions open, the most it keeps "
                    f"(EXAI_MCP_MAX_SESSIONS={self.total}); try again once some have ended",
                    mine=False,
                )
        self._opening[owner] = self._opening.get(owner, 0) + 1
        return None

    def release(self, owner: str) -> None:
        """The opening request of ``owner`` has been answered (opened or not)."""
        left = self._opening.get(owner, 0) - 1
        if left > 0:
            self._opening[owner] = left
        else:
            self._opening.pop(owner, None)

    def opened(self, session_id: str, owner: str) -> None:
        """The SDK answered an opening request of ``owner`` with ``session_id``."""
        self._sessions[session_id] = _Session(owner, idle_since=self._clock())
        self._by_owner.setdefault(owner, set()).add(session_id)

    # --- requests on a session ------------------------------------------------------

    def owner(self, session_id: str) -> str | None:
        """Who owns ``session_id``; None when the book does not know it (or it expired)."""
        self._expire((session_id,))
        session = self._sessions.get(session_id)
        return session.owner if session is not None else None

    def begin(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight += 1

    def end(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight -= 1
            if session.in_flight <= 0:
                session.in_flight = 0
                session.idle_since = self._clock()

    def ended(self, session_id: str) -> None:
        """The session is gone (deleted, or unknown to the SDK)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        owned = self._by_owner.get(session.owner)
        if owned is not None:
            owned.discard(session_id)
            if not owned:
                del self._by_owner[session.owner]

    # --- the standalone stream ----------------------------------------------------------

    def open_stream(self, session_id: str) -> bool:
        """Take the session's one standalone stream; False if it is taken."""
        session = self._sessions.get(session_id)
        if session is None:
            return True  # not ours to count: the SDK answers for it
        if session.streaming:
            return False
        session.streaming = True
        return True

    def close_stream(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.streaming = False

    # --- counting ----------------------------------------------------------------

    def held_by(self, owner: str) -> int:
        self._expire(self._by_owner.get(owner, set()))
        return len(self._by_owner.get(owner, ()))

    def __len__(self) -> int:
        return len(self._sessions)

    def _count(self) -> int:
        return len(self._sessions) + sum(self._opening.values())

    def _expire(self, session_ids: Iterable[str]) -> None:
        now = self._clock()
        for session_id in list(session_ids):
            session = self._sessions.get(session_id)
            if (
                session is not None
                and session.in_flight == 0
                and (now - session.idle_since > self.idle_s)
            ):
                self.ended(session_id)
