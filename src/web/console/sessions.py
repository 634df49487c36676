"""Console sign-ins: who a browser is, for how long, and its CSRF token. No I/O.

Signing in with an exai token or JWT makes a :class:`ConsoleSession`, kept in
this daemon's memory and named by a random 256-bit id that travels only in
the ``exai_console`` cookie: ``HttpOnly`` (no script reads it),
``SameSite=Strict`` (no other site's page or link sends it), ``Path=/console``,
``Secure`` when the console is served over https, and expiring with the
session. The session holds the principal the credential gave, so a cookie
means exactly one principal; the credential itself is never kept.

A session lasts ``EXAI_CONSOLE_SESSION_TTL_S`` from sign-in, never longer than
the JWT it was made with. Every state-changing request must carry the
session's CSRF token (a form field or the ``X-Exai-CSRF`` header), compared in
constant time. The sign-in form, which has no session yet, is protected the
same way by a short-lived token in a cookie of its own (double submit).

Sessions live in the daemon's memory (at most ``max_sessions``; past that the
oldest go first) and in the conversation store, so that any daemon on a shared
Postgres accepts them and a restart keeps them: what crosses to the store is
:func:`session_key` (a digest of the cookie, never the cookie),
:func:`principal_record` and the flashes; :mod:`.sign_ins` does that I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

from exai.auth import Credential, Principal, budget_from_claim, budget_to_claim

__all__ = [
    "COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "LOGIN_COOKIE",
    "ConsoleSession",
    "ConsoleSessions",
    "cookie_header",
    "cookie_value",
    "principal_from_record",
    "principal_record",
    "session_key",
    "tokens_match",
]

COOKIE = "exai_console"
LOGIN_COOKIE = "exai_console_login"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-exai-csrf"
LOGIN_TTL_S = 600.0


@dataclass(slots=True)
class ConsoleSession:
    id: str  # the cookie's value: a secret
    principal: Principal
    csrf: str
    created_at: float
    expires_at: float
    flashes: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) to show once
    # The flashes changed since the store last had them.
    flashes_changed: bool = False

    @property
    def public_id(self) -> str:
        """A name for the session in logs and audit events that does not reveal the cookie."""
        return "console-" + hashlib.sha256(self.id.encode()).hexdigest()[:16]

    def flash(self, kind: str, text: str) -> None:
        self.flashes.append((kind, text))
        del self.flashes[:-5]
        self.flashes_changed = True

    def take_flashes(self) -> list[tuple[str, str]]:
        out, self.flashes = self.flashes, []
        self.flashes_changed = self.flashes_changed or bool(out)
        return out


class ConsoleSessions:
    def __init__(self, ttl_s: float, max_sessions: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, ConsoleSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def sign_in(self, principal: Principal, now: float) -> ConsoleSession:
        self.sweep(now)  # sessions nobody came back to go when someone signs in
        expires = now + self.ttl_s
        if principal.expires_at is not None:
            expires = min(expires, principal.expires_at)
        session = ConsoleSession(
            secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), now, expires
        )
        self._sessions[session.id] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def adopt(self, session: ConsoleSession) -> ConsoleSession:
        """Hold a session signed in elsewhere (another daemon, or before a restart)."""
        self._sessions[session.id] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None, now: float) -> ConsoleSession | None:
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires_at <= now:
            del self._sessions[session_id]
            return None
        return session

    def sign_out(self, session_id: str) -> ConsoleSession | None:
        return self._sessions.pop(session_id, None)

    def sweep(self, now: float) -> int:
        gone = [sid for sid, s in self._sessions.items() if s.expires_at <= now]
        for sid in gone:
            del self._sessions[sid]
        return len(gone)


def session_key(session_id: str) -> str:
    """What names a session in the store: a digest of its cookie, which reading the
    store does not give back."""
    return hashlib.sha256(b"exai-console-session\0" + session_id.encode()).hexdigest()


def principal_record(principal: Principal) -> str:
    """``principal`` as JSON, for the store; :func:`principal_from_record` reads it."""
    credential = principal.credential
    return json.dumps({
        "name": principal.name,
        "scopes": None if principal.scopes is None else sorted(principal.scopes),
        "method": principal.method,
        "budget": None if principal.budget is None else budget_to_claim(principal.budget),
        "expires_at": principal.expires_at,
        "memory": principal.memory,
        "credential": None if credential is None else credential.public(),
        "key_id": principal.key_id,
        "models": None if principal.models is None else sorted(principal.models),
        "rate_per_min": principal.rate_per_min,
    }, sort_keys=True)  # fmt: skip


def principal_from_record(text: str) -> Principal:
    """The principal :func:`principal_record` wrote; ``ValueError`` for anything else."""
    value = json.loads(text)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ValueError("not a principal record")
    scopes, budget, credential = value.get("scopes"), value.get("budget"), value.get("credential")
    expires = value.get("expires_at")
    models, rate, key_id = value.get("models"), value.get("rate_per_min"), value.get("key_id")
    return Principal(
        value["name"],
        scopes=None if scopes is None else frozenset(str(s) for s in scopes),
        method=str(value.get("method", "token")),
        budget=None if budget is None else budget_from_claim(budget),
        expires_at=None if expires is None else float(expires),
        memory=value.get("memory"),
        credential=None if credential is None else Credential.from_public(credential),
        key_id=None if key_id is None else str(key_id),
        models=None if models is None else frozenset(str(m) for m in models),
        rate_per_min=None if rate is None else int(rate),
    )


def tokens_match(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), str(given).encode())


def cookie_value(headers: Mapping[str, str], name: str) -> str | None:
    """The value of cookie ``name`` in a request's ``Cookie`` header, if any."""
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is a request without our cookie
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def cookie_header(
    name: str, value: str, *, max_age: float, path: str = "/console", secure: bool = False
) -> str:
    """A ``Set-Cookie`` value: HttpOnly, SameSite=Strict; ``max_age`` 0 deletes it."""
    parts: list[Any] = [
        f"{name}={value}",
        f"Path={path}",
        f"Max-Age={max(0, int(max_age))}",
        "HttpOnly",
        "SameSite=Strict",
    ]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
