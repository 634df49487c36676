"""The operator's keys: what one is, how its secret is made and checked, and the ring
of keys a daemon holds in memory.

A key is a row in the store (:mod:`exai.store.keys`) naming a principal and what it
may do: scopes, a budget, a rate in calls a minute, the models it may use, an
expiry. Its secret is shown once, as ``exai_<id>_<secret>``: the id is readable
(lists, logs and audit events name it), the secret is 32 random bytes of which the
store keeps only the SHA-256. A high-entropy secret needs no slow hash: nobody can
guess it, and the digest of a random string reveals nothing about it.

:class:`KeyRing` is the daemon's copy of every key's id, digest and grant, replaced
whole when the store's change marker moves (:mod:`exai.daemon.keys` polls it), so
authenticating a key is a dict look-up, one SHA-256 and a constant-time compare,
with no I/O. It also holds the JWT ids (``jti``) an operator revoked. Its decisions
(:meth:`KeyRing.principal`, :meth:`KeyRing.problem`) are pure functions of what it
holds and the time given.

Everything here is free of I/O; ``parse_*`` read the CLI's and the API's spelling
of a grant and raise ``ValueError`` naming what is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from exai.errors import UnauthorizedError, ValidationError_
from exai.settings.values import Budget, parse_budget

__all__ = [
    "KEY_PREFIX",
    "KeyAdmin",
    "KeyNotFoundError",
    "KeyRecord",
    "KeyRing",
    "RevokedJti",
    "hash_secret",
    "new_key",
    "parse_expiry",
    "parse_key_budget",
    "parse_models",
    "parse_rate",
    "parse_scopes",
    "split_key",
]

KEY_PREFIX = "exai_"
State = Literal["active", "revoked", "expired"]
_ID = re.compile(r"^[0-9a-f]{12}$")
_SECRET = re.compile(r"^[A-Za-z0-9_-]{20,100}$")
_DURATION = re.compile(r"^(\d{1,6})\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RATE = re.compile(r"^(\d{1,7})\s*(?:/\s*(min|minute|m))?$")
_NAME = re.compile(r"^[A-Za-z0-9._:@/+-]{1,200}$")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key() -> tuple[str, str, str]:
    """A fresh ``(id, token, digest)``: the token is what the holder presents, once."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, f"{KEY_PREFIX}{key_id}_{secret}", hash_secret(secret)


def split_key(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a token spelled as a key, or None."""
    if not token.startswith(KEY_PREFIX):
        return None
    key_id, sep, secret = token[len(KEY_PREFIX) :].partition("_")
    if not sep or not _ID.match(key_id) or not _SECRET.match(secret):
        return None
    return key_id, secret


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One key as the store keeps it (never its secret)."""

    id: str
    secret_hash: str
    principal: str
    scopes: frozenset[str] | None = None  # None: every tool
    budget: Budget | None = None  # None: EXAI_BUDGETS decides
    rate_per_min: int | None = None  # None: EXAI_RATE_LIMIT_PER_MIN
    models: frozenset[str] | None = None  # None: every model
    expires_at: float | None = None
    created_at: float = 0.0
    last_used_at: float | None = None
    revoked_at: float | None = None
    name: str = ""
    note: str = ""

    def state(self, now: float) -> State:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"

    def public(self, now: float) -> dict[str, Any]:
        """What may be shown of the key: everything but its digest."""
        budget = self.budget
        return {
            "id": self.id,
            "name": self.name,
            "note": self.note,
            "principal": self.principal,
            "scopes": None if self.scopes is None else sorted(self.scopes),
            "budget": None if budget is None else {"amount": str(budget.amount),
                                                    "currency": budget.currency,
                                                    "period": budget.period},
            "rate_per_min": self.rate_per_min,
            "models": None if self.models is None else sorted(self.models),
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "revoked_at": self.revoked_at,
            "state": self.state(now),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class RevokedJti:
    jti: str
    revoked_at: float
    note: str = ""


def parse_scopes(text: str | Iterable[str] | None) -> frozenset[str] | None:
    """``"chat,completion"`` -> the scopes; None, ``""`` or ``"*"``: every tool."""
    if text is None:
        return None
    names = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    if not names or "*" in names:
        return None
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"scopes: {name!r} is not a tool name or scope")
    return frozenset(names)


def parse_models(text: str | Iterable[str] | None) -> frozenset[str] | None:
    """``"kimi-k2.6,glm-5.1"`` -> the models; None, ``""``, ``"all"`` or ``"*"``: every model."""
    if text is None:
        return None
    names = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    if not names or "*" in names or "all" in names:
        return None
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"models: {name!r} is not a model name")
    return frozenset(names)


def parse_rate(text: str | int | None) -> int | None:
    """``"60/min"`` or ``60`` -> calls a minute; None or ``""``: the setting decides."""
    if text is None or text == "":
        return None
    if isinstance(text, bool):
        raise ValueError("rate: must look like 60/min")
    match = _RATE.match(str(text).strip())
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"rate: {text!r} must look like 60/min (at least 1 call a minute)")
    return int(match.group(1))


def parse_expiry(text: str | float | None, now: float) -> float | None:
    """``"30d"``, ``"12h"``, an ISO date or epoch seconds -> when the key expires."""
    if text is None or text == "" or text == "never":
        return None
    if isinstance(text, bool):
        raise ValueError("expires: must be a duration such as 30d or an ISO date")
    if isinstance(text, int | float):
        at = float(text)
    else:
        value = text.strip()
        match = _DURATION.match(value)
        if match:
            at = now + int(match.group(1)) * _UNIT_S[match.group(2)]
        else:
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"expires: {text!r} must be a duration such as 30d, 12h or "
                                 "90m, or an ISO date such as 2027-01-31") from None  # fmt: skip
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            at = moment.timestamp()
    if at <= now:
        raise ValueError("expires: must be in the future")
    return at


def parse_key_budget(value: Any) -> Budget | None:
    if value is None or value == "":
        return None
    return parse_budget(value, "budget")


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


@dataclass
class KeyRing:
    """Every key's grant and the revoked JWT ids, as of the store's ``version``."""

    version: int = -1
    _keys: dict[str, KeyRecord] = field(default_factory=dict)
    _jtis: frozenset[str] = frozenset()
    # Keys presented since the last flush, by id: when (the store writes them in batches).
    _used: dict[str, float] = field(default_factory=dict)

    def replace(self, keys: Iterable[KeyRecord], jtis: Iterable[str], version: int) -> None:
        self._keys = {k.id: k for k in keys}
        self._jtis = frozenset(jtis)
        self.version = version

    @property
    def holds_keys(self) -> bool:
        """Whether the store has ever had a key (a daemon with one is not open to all)."""
        return bool(self._keys)

    def get(self, key_id: str) -> KeyRecord | None:
        return self._keys.get(key_id)

    def principal_of(self, token: str, now: float) -> KeyRecord | None:
        """The key ``token`` presents, or None when it names no key here.

        Raises ``UnauthorizedError`` for a key whose secret is wrong, or which was
        revoked or has expired."""
        parts = split_key(token)
        if parts is None:
            return None
        record = self._keys.get(parts[0])
        if record is None:
            return None
        if not hmac.compare_digest(hash_secret(parts[1]), record.secret_hash):
            raise UnauthorizedError("invalid token")
        if record.revoked_at is not None:
            raise UnauthorizedError(f"this key was revoked ({record.id}, at "
                                    f"{_when(record.revoked_at)})")  # fmt: skip
        if record.expires_at is not None and now >= record.expires_at:
            raise UnauthorizedError(f"this key expired ({record.id}, at "
                                    f"{_when(record.expires_at)})")  # fmt: skip
        self._used[record.id] = now
        return record

    def check(self, key_id: str, now: float) -> None:
        """Raise ``UnauthorizedError`` unless ``key_id`` still grants calls: a session
        opened with a key ends its calls once the key is revoked or expires."""
        record = self._keys.get(key_id)
        if record is None:
            raise UnauthorizedError(f"this key no longer exists ({key_id})")
        if record.revoked_at is not None:
            raise UnauthorizedError(f"this key was revoked ({key_id}, at "
                                    f"{_when(record.revoked_at)})")  # fmt: skip
        if record.expires_at is not None and now >= record.expires_at:
            raise UnauthorizedError(f"this key expired ({key_id}, at "
                                    f"{_when(record.expires_at)})")  # fmt: skip

    def take_used(self) -> dict[str, float]:
        used, self._used = self._used, {}
        return used

    def jti_revoked(self, jti: str) -> bool:
        return jti in self._jtis

    def problem(self, key_id: str, owner: str, now: float) -> str | None:
        """Why the key ``key_id`` no longer grants ``owner``'s calls, or None."""
        record = self._keys.get(key_id)
        if record is None:
            return f"the key that made it ({key_id}) no longer exists"
        if record.principal != owner:
            return f"the key that made it ({key_id}) names principal {record.principal!r}"
        if record.revoked_at is not None:
            return f"the key that made it ({key_id}) was revoked at {_when(record.revoked_at)}"
        if record.expires_at is not None and now >= record.expires_at:
            return f"the key that made it ({key_id}) expired at {_when(record.expires_at)}"
        return None


class KeyNotFoundError(ValidationError_):
    """An operation named a key the store does not hold."""


class KeyAdmin(Protocol):
    """What the operator does with keys (the CLI, the admin API and the console call it).

    Every answer is the key's public form (:meth:`KeyRecord.public` plus ``spent``);
    ``create`` and ``rotate`` also return the token, which is shown once and kept
    nowhere. Bad input raises ``ValueError``; an unknown id :class:`KeyNotFoundError`.
    """

    async def list_keys(self) -> list[dict[str, Any]]: ...

    async def create_key(self, grant: dict[str, Any], *, by: str) -> tuple[dict[str, Any], str]:
        """``grant``: ``principal`` and optional ``scopes``, ``budget``, ``rate``,
        ``models``, ``expires``, ``name``, ``note`` in the CLI's spelling."""
        ...

    async def update_key(self, key_id: str, changes: dict[str, Any], *, by: str) -> dict[str, Any]:
        """Change a key's ``scopes``, ``budget``, ``rate``, ``models``, ``expires``,
        ``name`` or ``note`` at run time (``None`` or ``""``: back to the default)."""
        ...

    async def revoke_key(self, key_id: str, *, by: str) -> dict[str, Any]: ...

    async def rotate_key(self, key_id: str, *, by: str) -> tuple[dict[str, Any], str]: ...

    async def revoke_jti(self, jti: str, *, note: str = "", by: str) -> bool: ...

    async def list_jtis(self) -> list[dict[str, Any]]:
        """The JWT ids refused before their expiry, newest first: ``jti``,
        ``revoked_at``, ``note``."""
        ...
