"""Who is calling: static tokens and HS256 JWTs turned into a :class:`Principal`.

Static tokens are compared in constant time (``hmac.compare_digest``) against
every configured token, so the time taken does not reveal which prefix matched.
A JWT needs ``sub``, ``exp`` and may carry ``nbf``, ``scopes`` (a list of tool
names, or ``"*"``; scopes restrict which tools the principal may call) and
``exai_budget`` (``{amount, currency, period}``: what the principal may spend
per UTC day or month, see :mod:`exai.settings.values`) and ``exai_memory``
(true or false: whether the model faces bring the principal's memories, over
``EXAI_FACES_MEMORY``), ``exai_models`` (a non-empty list of model names or aliases:
the only models it may use, see :mod:`exai.accounting.limits`) and ``exai_sessions``
(true or false: whether its model-face requests are kept as agent sessions, over
``EXAI_FACES_SESSIONS``).

A principal is an *operator* when a JWT gives it the scope ``exai:admin``
(:data:`ADMIN_SCOPE`) or ``EXAI_ADMIN_PRINCIPALS`` names it (:func:`is_admin`):
it sees every principal's spend, the audit trail, health and settings in the
console. Scopes ``None`` or ``"*"`` (every tool) do not make an operator.

Every principal carries the :class:`Credential` it was authenticated by: the
kind, an identifier (an HMAC fingerprint of the token, never the token), and
for a JWT its expiry and which secret signed it. A job keeps it, and before
each run the daemon asks :meth:`Authenticator.credential_problem` whether that
credential still grants the job's owner anything: a run after the JWT expired,
or after its token was removed from the settings, does not happen.

The operator's keys (``exai_<id>_<secret>``, :mod:`exai.keys`, docs/keys.md) are
checked against the daemon's :class:`~exai.keys.KeyRing` when one is attached
(:attr:`Authenticator.keys`): a dict look-up, no I/O. A key that was revoked or
expired is refused saying so, and a job or agent loop it started stops (its
credential is of kind ``key``). A JWT whose ``jti`` the operator revoked is
refused the same way. A daemon with no token or JWT secret configured is open to
everyone as ``anonymous`` until the store holds a key.

A correctly signed JWT is still refused (``UnauthorizedError``, so 4003) when a
claim has the wrong type: ``sub`` a non-empty string, ``exp``, ``nbf`` and
``iat`` JSON numbers, ``scopes`` a list of strings or one string of names
separated by spaces or commas. PyJWT checks some of this, leniently (it reads
``"exp": "1700000000"`` as a number); everything the principal is built from
is checked here.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import jwt

from exai.errors import UnauthorizedError
from exai.keys import KEY_PREFIX, KeyRecord, KeyRing
from exai.settings.values import Budget, parse_budget, parse_token_list

__all__ = [
    "ADMIN_SCOPE",
    "Authenticator",
    "Credential",
    "Principal",
    "budget_from_claim",
    "budget_to_claim",
    "credential_id",
    "is_admin",
    "issue_token",
    "parse_token_list",
]

ANONYMOUS = "anonymous"
ADMIN_SCOPE = "exai:admin"
_ID_KEY = b"exai credential id"


def credential_id(secret: str) -> str:
    """A stable identifier of a token or a JWT secret that does not reveal it."""
    return hmac.new(_ID_KEY, secret.encode(), hashlib.sha256).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Credential:
    """Which credential a principal presented, without the secret.

    ``kind``: ``token`` (a static token), ``jwt``, ``key`` (one of the operator's
    keys) or ``none`` (a daemon with no credentials configured). ``id``:
    :func:`credential_id` of the token or JWT, or the key's id. ``key``: for a
    JWT, :func:`credential_id` of the secret that signed it. ``expires_at``: a
    JWT's ``exp`` or a key's expiry (epoch seconds). ``jti``: a JWT's id, which
    the operator may revoke.
    """

    kind: Literal["token", "jwt", "key", "none"]
    id: str
    key: str | None = None
    expires_at: float | None = None
    jti: str | None = None

    def public(self) -> dict[str, Any]:
        out = {"kind": self.kind, "id": self.id, "key": self.key, "expires_at": self.expires_at}
        if self.jti is not None:
            out["jti"] = self.jti
        return out

    @classmethod
    def from_public(cls, value: dict[str, Any]) -> Credential:
        kind = value.get("kind")
        if kind not in ("token", "jwt", "key", "none"):
            raise ValueError(f"not a credential kind: {kind!r}")
        expires = value.get("expires_at")
        jti = value.get("jti")
        return cls(kind, str(value.get("id", "")), value.get("key"),
                   None if expires is None else float(expires),
                   None if jti is None else str(jti))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    scopes: frozenset[str] | None = None  # None: every tool
    method: str = "token"
    budget: Budget | None = None  # from the token; None: EXAI_BUDGETS decides
    expires_at: float | None = None  # a JWT's exp; what is made from it must not outlive it
    memory: bool | None = None  # memory on the model faces, from the token; None: settings
    # Whether its model-face requests are kept as agent sessions; None: settings
    sessions: bool | None = None
    # The key it came with, when it is one of the operator's keys (docs/keys.md): its
    # id (never the secret), the models it may use (None: every model) and its own
    # rate limit in calls a minute (None: EXAI_RATE_LIMIT_PER_MIN).
    key_id: str | None = field(default=None, compare=False)
    models: frozenset[str] | None = None
    rate_per_min: int | None = None
    # Not part of who the principal is: two tokens of one principal are the same principal.
    credential: Credential | None = field(default=None, compare=False)

    def may_call(self, tool: str) -> bool:
        return self.scopes is None or "*" in self.scopes or tool in self.scopes


def is_admin(principal: Principal, admins: Collection[str]) -> bool:
    """Whether ``principal`` has the operator's view (its own scope, or named by the setting)."""
    return principal.name in admins or (
        principal.scopes is not None and ADMIN_SCOPE in principal.scopes
    )


def budget_to_claim(budget: Budget) -> dict[str, str]:
    """A budget as a JWT's ``exai_budget`` claim holds it (and a job records it)."""
    return {"amount": str(budget.amount), "currency": budget.currency, "period": budget.period}


def budget_from_claim(value: Any) -> Budget:
    """The budget of an ``exai_budget`` claim; ``ValueError`` if it is not one."""
    return parse_budget(value, "exai_budget")


class Authenticator:
    def __init__(
        self,
        tokens: dict[str, str] | None = None,
        jwt_secret: str | None = None,
        leeway_s: float = 30.0,
        *,
        keys: KeyRing | None = None,
    ) -> None:
        self._tokens = [(t.encode(), name, credential_id(t)) for t, name in (tokens or {}).items()]
        self._names_by_id = {token_id: name for _, name, token_id in self._tokens}
        self._jwt_secret = jwt_secret
        self._jwt_key = credential_id(jwt_secret) if jwt_secret else None
        self._leeway = leeway_s
        # The operator's keys and revoked JWT ids, kept current by the daemon
        # (exai.daemon.keys); None where no store is at hand (the CLI).
        self.keys = keys

    @property
    def open(self) -> bool:
        """True when no credential is configured: everyone is ``anonymous``."""
        return (
            not self._tokens
            and not self._jwt_secret
            and not (self.keys is not None and self.keys.holds_keys)
        )

    def authenticate(self, token: str | None) -> Principal:
        if token and self.keys is not None and token.startswith(KEY_PREFIX):
            record = self.keys.principal_of(token, time.time())
            if record is not None:
                return _principal_from_key(record)
        if self.open:
            return Principal(ANONYMOUS, method="none", credential=_OPEN)
        if not token:
            raise UnauthorizedError("a token is required")
        if self._jwt_secret and token.count(".") == 2:
            return self._from_jwt(token)
        match = self._match_static(token.encode())
        if match is None:
            raise UnauthorizedError("invalid token")
        name, token_id = match
        return Principal(name, method="token", credential=Credential("token", token_id))

    def _match_static(self, presented: bytes) -> tuple[str, str] | None:
        found = None
        for candidate, name, token_id in self._tokens:
            # Compare against every token, not stopping at the first match.
            if hmac.compare_digest(candidate, presented) and found is None:
                found = (name, token_id)
        return found

    def credential_problem(
        self, owner: str, credential: Credential | None, now: float
    ) -> str | None:
        """Why ``credential`` no longer grants ``owner``'s calls, or None while it does.

        A JWT's expiry is its ``exp`` exactly: the leeway covers a client's clock at
        the moment it presents a token, and here the daemon's own clock decides.
        None for no credential at all (a job the operator made with ``exai jobs``).
        """
        if credential is None:
            return None
        if credential.kind == "none":
            if self.open:
                return None
            return "it was made while the daemon had no token, and it has tokens now"
        if credential.kind == "key":
            if self.keys is None:
                return None
            return self.keys.problem(credential.id, owner, now)
        if credential.kind == "token":
            name = self._names_by_id.get(credential.id)
            if name is None:
                return (f"the token that made it ({credential.id[:8]}...) is no longer configured "
                        "(EXAI_WS_TOKEN, EXAI_WS_TOKENS)")  # fmt: skip
            if name != owner:
                return f"the token that made it now names principal {name!r}, not {owner!r}"
            return None
        if self._jwt_key is None or credential.key != self._jwt_key:
            return "the secret that signed its JWT is no longer configured (EXAI_JWT_SECRET)"
        if credential.expires_at is not None and now >= credential.expires_at:
            when = datetime.fromtimestamp(credential.expires_at, UTC).isoformat(timespec="seconds")
            return f"the JWT that made it expired at {when}"
        if credential.jti is not None and self.keys is not None:
            if self.keys.jti_revoked(credential.jti):
                return f"the JWT that made it (jti {credential.jti!r}) was revoked"
        return None

    def _from_jwt(self, token: str) -> Principal:
        assert self._jwt_secret is not None
        try:
            claims = jwt.decode(
                token,
                self._jwt_secret,
                algorithms=["HS256"],
                leeway=self._leeway,
                options={"require": ["exp", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise UnauthorizedError("token expired") from None
        except jwt.ImmatureSignatureError:
            raise UnauthorizedError("token not yet valid") from None
        except jwt.InvalidTokenError as exc:
            raise UnauthorizedError(f"invalid token: {exc}") from None
        principal = _principal_from_claims(claims)
        jti = claims.get("jti")
        if jti is not None and not isinstance(jti, str):
            raise UnauthorizedError("invalid token: jti must be a string")
        if jti is not None and self.keys is not None and self.keys.jti_revoked(jti):
            raise UnauthorizedError(f"this token was revoked (jti {jti!r})")
        credential = Credential("jwt", credential_id(token), self._jwt_key, principal.expires_at,
                                jti)  # fmt: skip
        return replace(principal, credential=credential)


_OPEN = Credential("none", "open")


def _principal_from_key(record: KeyRecord) -> Principal:
    credential = Credential("key", record.id, expires_at=record.expires_at)
    return Principal(record.principal, scopes=record.scopes, method="key", budget=record.budget,
                     expires_at=record.expires_at, key_id=record.id, models=record.models,
                     rate_per_min=record.rate_per_min, credential=credential)  # fmt: skip


def _principal_from_claims(claims: dict[str, Any]) -> Principal:
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.strip():
        raise UnauthorizedError("invalid token: sub must be a non-empty string")
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UnauthorizedError(f"invalid token: {name} must be a number")
    scopes = claims.get("scopes")
    if isinstance(scopes, str):
        scopes = scopes.replace(",", " ").split()
    elif scopes is not None and not (
        isinstance(scopes, list) and all(isinstance(s, str) for s in scopes)
    ):
        raise UnauthorizedError("invalid token: scopes must be a list of tool names")
    scope_set = frozenset(scopes) if scopes is not None else None
    budget = None
    if "exai_budget" in claims:
        try:
            budget = parse_budget(claims["exai_budget"], "exai_budget")
        except ValueError as exc:
            raise UnauthorizedError(f"invalid token: {exc}") from None
    switches = {}
    for claim in ("exai_memory", "exai_sessions"):
        value = claims.get(claim)
        if value is not None and not isinstance(value, bool):
            raise UnauthorizedError(f"invalid token: {claim} must be true or false")
        switches[claim] = value
    models = claims.get("exai_models")
    if models is not None and not (
        isinstance(models, list) and models
        and all(isinstance(m, str) and m.strip() for m in models)
    ):  # fmt: skip
        raise UnauthorizedError("invalid token: exai_models must be a list of model names")
    exp = claims.get("exp")
    return Principal(sub, scopes=scope_set, method="jwt", budget=budget,
                     memory=switches["exai_memory"], sessions=switches["exai_sessions"],
                     models=None if models is None else frozenset(m.strip() for m in models),
                     expires_at=float(exp) if exp is not None else None)  # fmt: skip


def issue_token(
    secret: str,
    sub: str,
    scopes: Iterable[str] | None = None,
    ttl_s: float = 3600.0,
    budget: Budget | None = None,
    memory: bool | None = None,
    sessions: bool | None = None,
    jti: str | None = None,
    models: Iterable[str] | None = None,
) -> str:
    """A JWT for ``sub``; its ``jti`` (random unless given) is what ``exai keys
    revoke --jti`` names to refuse it before it expires."""
    now = int(time.time())
    claims: dict[str, object] = {"sub": sub, "iat": now, "nbf": now, "exp": now + int(ttl_s),
                                 "jti": jti or secrets.token_hex(8)}  # fmt: skip
    if scopes is not None:
        claims["scopes"] = list(scopes)
    if budget is not None:
        claims["exai_budget"] = budget_to_claim(budget)
    if memory is not None:
        claims["exai_memory"] = memory
    if sessions is not None:
        claims["exai_sessions"] = sessions
    if models is not None:
        claims["exai_models"] = list(models)
    return jwt.encode(claims, secret, algorithm="HS256")
