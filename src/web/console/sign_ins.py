"""The console's sign-ins in this daemon's memory and in the store, honoured by every daemon.

Behind a load balancer without sticky sessions, a browser signed in on one
daemon sends its next request to another, and its sign-out may reach a third.
:class:`SignIns` keeps each session in memory (:class:`~.sessions.ConsoleSessions`)
and in the conversation store (:class:`exai.port.SignInStore`):

- **signing in** writes the row before the browser is answered, so its next
  request finds it wherever it lands;
- **the guard's check** (:meth:`SignIns.check`, once per request) reads the row
  when memory does not hold the session (another daemon signed it in, or this
  one restarted), and on every request when the store is shared (Postgres), so a
  sign-out anywhere ends the session everywhere at once; a row past its expiry,
  or whose credential this daemon no longer accepts (a token since removed, a
  JWT's secret rotated), signs no one in;
- **signing out** deletes the row, then forgets the session here;
- **flashes** (the messages shown once, on the next page) are written back when a
  response starts (:meth:`SignIns.save`), so the page after a redirect shows them
  on any daemon.

The rest of a request (CSRF check, page rendering) uses the copy the check left in
memory (:meth:`SignIns.get`). Without a store, sessions live in memory only.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from exai.auth import Credential, Principal
from exai.logs import get_logger
from exai.port import SignInRow, SignInStore
from exai.web.console.sessions import (
    ConsoleSession,
    ConsoleSessions,
    principal_from_record,
    principal_record,
    session_key,
)

__all__ = ["SignIns"]

log = get_logger("exai.web.console")

# Why a credential no longer grants its principal anything, or None (Port.credential_problem).
Problem = Callable[[str, Credential | None, float], str | None]


class SignIns:
    def __init__(
        self,
        store: SignInStore | None,
        ttl_s: float,
        credential_problem: Problem,
        max_sessions: int = 10_000,
    ) -> None:
        self.memory = ConsoleSessions(ttl_s, max_sessions)
        self._store = store
        self._problem = credential_problem

    async def sign_in(self, principal: Principal, now: float) -> ConsoleSession:
        """A new session for ``principal``, kept in the store before it is returned;
        the store's error propagates (and the session is not kept here either)."""
        session = self.memory.sign_in(principal, now)
        if self._store is not None:
            try:
                await self._store.put_sign_in(SignInRow(
                    session_key(session.id), principal_record(principal), session.csrf,
                    session.created_at, session.expires_at, "[]",
                ))  # fmt: skip
            except BaseException:
                self.memory.sign_out(session.id)
                raise
        return session

    def get(self, session_id: str | None, now: float) -> ConsoleSession | None:
        """The session as memory holds it (after this request's :meth:`check`)."""
        return self.memory.get(session_id, now)

    async def check(self, session_id: str | None, now: float) -> ConsoleSession | None:
        """The signed-in session a request's cookie names, or None."""
        if not session_id:
            return None
        held = self.memory.get(session_id, now)
        store = self._store
        if store is None or (held is not None and not store.shared):
            if held is not None and not self._key_still_grants(held, now):
                self.memory.sign_out(session_id)
                return None
            return held
        try:
            row = await store.sign_in_row(session_key(session_id))
        except Exception as exc:
            # An unreachable store fails every other page too; what this daemon
            # holds still stands, nothing new is let in.
            log.warning("reading a console sign-in failed", error=f"{type(exc).__name__}: {exc}")
            return held
        session = self._from_row(session_id, row, now)
        if session is None:
            self.memory.sign_out(session_id)
            return None
        if held is not None:  # keep the object other parts of the request may hold
            held.flashes, held.flashes_changed = session.flashes, False
            held.expires_at = session.expires_at
            return held
        return self.memory.adopt(session)

    def _key_still_grants(self, session: ConsoleSession, now: float) -> bool:
        """A sign-in made with an operator's key ends when the key is revoked or
        expires (the check reads the daemon's key ring: no I/O)."""
        credential = session.principal.credential
        if credential is None or credential.kind != "key":
            return True
        problem = self._problem(session.principal.name, credential, now)
        if problem is not None:
            log.info("a console sign-in is no longer honoured",
                     principal=session.principal.name, reason=problem)  # fmt: skip
        return problem is None

    def _from_row(
        self, session_id: str, row: SignInRow | None, now: float
    ) -> ConsoleSession | None:
        if row is None or row.expires_at <= now:
            return None
        try:
            principal = principal_from_record(row.principal)
            flashes = [(str(kind), str(text)) for kind, text in json.loads(row.flashes)]
        except (ValueError, TypeError) as exc:
            log.warning("a console sign-in in the store is unreadable", error=str(exc))
            return None
        problem = self._problem(principal.name, principal.credential, now)
        if problem is not None:
            log.info("a console sign-in is no longer honoured", principal=principal.name,
                     reason=problem)  # fmt: skip
            return None
        return ConsoleSession(session_id, principal, row.csrf, row.created_at, row.expires_at,
                              flashes)  # fmt: skip

    async def sign_out(self, session_id: str) -> ConsoleSession | None:
        """End the session here and in the store; the session, if memory held it."""
        if self._store is not None:
            await self._store.delete_sign_in(session_key(session_id))
        return self.memory.sign_out(session_id)

    async def save(self, session: ConsoleSession) -> None:
        """Write the session's flashes back if they changed during this request."""
        if self._store is None or not session.flashes_changed:
            return
        session.flashes_changed = False
        try:
            await self._store.set_sign_in_flashes(session_key(session.id),
                                                  json.dumps(session.flashes))  # fmt: skip
        except Exception as exc:  # the message is then shown on this daemon only
            log.warning("writing a console session's messages failed",
                        error=f"{type(exc).__name__}: {exc}")  # fmt: skip
