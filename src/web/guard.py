"""Who may use the HTTP faces: a bearer token, a trusted Host and Origin.

Every route but ``/health`` needs ``Authorization: Bearer <token or JWT>``,
checked by the same :class:`~exai.auth.Authenticator` as the WebSocket
``hello``, so a token means the same principal and scopes on both. A refusal is
401 with a ``WWW-Authenticate`` header, as RFC 6750 asks; failed attempts count
against the same per-address allowance as failed WebSocket logins
(:class:`~exai.admission.Admission`), and once it is spent requests
from that address are refused without their token being checked. A request
that passes (a bearer token, or a console session's cookie) tells ``on_login``
its client address, so the listener stops counting its connection as not
logged in (:mod:`exai.web.connections`).

A browser page must not reach a daemon on the user's machine: the MCP
specification requires servers to validate ``Origin``, and a DNS-rebinding
page arrives with a ``Host`` of the attacker's name. So a request that carries
an ``Origin`` is refused (403) unless that origin is the daemon's own address
or listed in ``EXAI_ALLOWED_ORIGINS``, and a daemon bound to loopback
answers only requests with exactly one ``Host`` header holding exactly one
loopback ``host[:port]`` (:func:`parse_host`: a name, an IPv4 address or an
IPv6 address in brackets, and a port of digits); a list, user information, a
path or anything after the port is refused, so ``127.0.0.1:8078, evil.example``
is not read as loopback.

The console's pages are for browsers, which cannot send a bearer header on a
link someone clicks: under a :class:`CookieRealm` (``/console``) a request is
authenticated by the realm's session cookie instead, the realm's sign-in form
and static files are open, and a request without a valid session is sent to
the sign-in form (a page) or refused with 401 (anything else). Every other
route keeps its bearer check, and the Host and Origin checks apply to all.
Failed sign-ins count against the same allowance as failed bearer tokens
(:func:`check_token`).

A refused bearer token (wrong, missing, expired, or not a bearer header at all)
is an ``auth_failed`` audit event, as a refused WebSocket ``hello`` and a failed
console sign-in are: the client's address, the reason and the face (named by the
longest prefix of ``faces`` the path falls under), never the token. While an
address is throttled its requests are refused without an event each, as on the
WebSocket face: that is what a guessing flood looks like.

Each face answers in its own dialect: a refusal's body is exai's
``{"error": {"code", "message"}}`` unless the path falls under a prefix given
an ``error_bodies`` shaper, the longest such prefix winning (``/v1`` answers as
OpenAI does and ``/v1/messages`` as Anthropic does, so their clients raise their
usual exceptions). Under the ``api_key_paths`` prefixes (``/v1/messages``) the
token may also come as ``x-api-key``, the header Anthropic's clients send; a
request that carries both headers is checked on ``Authorization``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from exai.auth import Authenticator, Principal
from exai.errors import UnauthorizedError
from exai.files.roots import is_loopback
from exai.protocol import ErrorCode, ErrorInfo
from exai.web.asgi import headers_of, send_json

__all__ = [
    "CookieRealm",
    "ErrorBody",
    "Guard",
    "LoginThrottled",
    "check_token",
    "parse_host",
    "principal_of",
]

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
ErrorBody = Callable[[ErrorInfo], dict[str, Any]]
T = TypeVar("T")
_STATE_KEY = "exai_principal"
# RFC 3986 reg-name as browsers and HTTP clients send it: letters, digits, - and .
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_PORT = re.compile(r"[0-9]{1,5}")


def parse_host(value: str) -> tuple[str, int | None] | None:
    """One ``Host`` header value as ``(host, port)``, or None unless it is exactly
    one ``host[:port]``: a name, an IPv4 address or a bracketed IPv6 address, and
    an optional port of 1 to 5 digits up to 65535."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, sep, port_text = value.partition(":")
        rest = sep + port_text
        if not _NAME.fullmatch(host):
            return None
    if not rest:
        return host, None
    if rest[0] != ":" or not _PORT.fullmatch(rest[1:]) or int(rest[1:]) > 65535:
        return None
    return host, int(rest[1:])


def principal_of(scope: dict[str, Any]) -> Principal:
    """The principal the guard authenticated for this request."""
    principal: Principal = scope["state"][_STATE_KEY]
    return principal


@dataclass(frozen=True, slots=True)
class CookieRealm:
    """Paths under ``prefix`` authenticate by a session cookie, not a bearer header.

    ``principal`` reads the request's headers (its ``Cookie``) and returns the
    signed-in principal, or None; it is a coroutine, since the session may be in a
    store several daemons share. ``open_paths`` (exact) and ``open_prefixes`` are
    served to anyone: the sign-in form and the static files it needs.
    """

    prefix: str
    principal: Callable[[dict[str, str]], Awaitable[Principal | None]]
    sign_in: str
    open_paths: frozenset[str] = frozenset()
    open_prefixes: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix.rstrip("/") + "/")

    def is_open(self, path: str) -> bool:
        return path in self.open_paths or path.startswith(self.open_prefixes)


class LoginThrottled(UnauthorizedError):
    """A login refused unchecked: its address has spent its allowance of failed ones."""


def check_token(auth: Authenticator, throttle: Any, token: str | None, peer: str) -> Principal:
    """The principal of ``token``, under the login throttle every face shares.

    While ``peer`` has spent its allowance of failed logins, its attempts are
    refused unchecked (:class:`LoginThrottled`), the right token too: that is
    what guessing looks like. A wrong token counts against the allowance.
    """
    if throttle is not None and (wait_s := throttle.login_wait_s(peer)) > 0:
        raise LoginThrottled(f"too many failed logins from {peer}; try again in {wait_s:.0f} s")
    try:
        return auth.authenticate(token)
    except UnauthorizedError:
        if throttle is not None and token is not None:
            throttle.login_failed(peer)
        raise


class Guard:
    """ASGI middleware in front of the HTTP faces."""

    def __init__(
        self,
        app: ASGIApp,
        auth: Authenticator,
        *,
        host: str,
        port: int,
        allowed_origins: list[str],
        open_paths: frozenset[str] = frozenset({"/health"}),
        throttle: Any = None,
        on_login: Callable[[Any], None] | None = None,
        error_bodies: Mapping[str, ErrorBody] | None = None,
        api_key_paths: tuple[str, ...] = (),
        cookie_realms: tuple[CookieRealm, ...] = (),
        faces: Mapping[str, str] | None = None,
        audit: Callable[..., None] | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.loopback = is_loopback(host)
        self.port = port
        self.allowed_origins = {o.rstrip("/") for o in allowed_origins}
        self.open_paths = open_paths
        self.throttle = throttle
        self.on_login = on_login
        self.error_bodies = _longest_first(error_bodies)
        self.api_key_paths = api_key_paths
        self.cookie_realms = cookie_realms
        self.faces = _longest_first(faces)
        self.audit = audit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = headers_of(scope)
        hosts = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"host"]
        refusal = self._check_host_and_origin(headers, hosts)
        if refusal is not None:
            body = self._body(scope["path"], ErrorInfo(code=ErrorCode.FORBIDDEN, message=refusal))
            await send_json(send, 403, body)
            return
        realm = next((r for r in self.cookie_realms if r.holds(scope["path"])), None)
        if realm is not None:
            if not realm.is_open(scope["path"]):
                principal = await realm.principal(headers)
                if principal is None:
                    await self._to_sign_in(scope, send, realm)
                    return
                scope.setdefault("state", {})[_STATE_KEY] = principal
                self._logged_in(scope)
        elif scope["path"] not in self.open_paths:
            peer = (scope.get("client") or ("?",))[0]
            header = headers.get("authorization")
            if (
                header is None
                and "x-api-key" in headers
                and _under(scope["path"], self.api_key_paths)
            ):
                header = f"Bearer {headers['x-api-key']}"
            try:
                principal = self._authenticate(header, str(peer))
            except UnauthorizedError as exc:
                if self.audit is not None and not isinstance(exc, LoginThrottled):
                    face = _by_prefix(scope["path"], self.faces) or "http"
                    self.audit("auth_failed", peer=str(peer), reason=exc.message, face=face)
                challenge = 'Bearer realm="exai", error="invalid_token"'
                if header is None:
                    challenge = 'Bearer realm="exai"'
                body = self._body(scope["path"], exc.info())
                # Claude Code retries a 401 eleven times unless told not to.
                headers = {"www-authenticate": challenge, "x-should-retry": "false"}
                await send_json(send, 401, body, headers)
                return
            scope.setdefault("state", {})[_STATE_KEY] = principal
            self._logged_in(scope)
        await self.app(scope, receive, send)

    def _logged_in(self, scope: dict[str, Any]) -> None:
        if self.on_login is not None:
            self.on_login(scope.get("client"))

    async def _to_sign_in(self, scope: dict[str, Any], send: Any, realm: CookieRealm) -> None:
        """A page is sent to the sign-in form, which comes back to it; anything else is 401."""
        if scope["method"] in ("GET", "HEAD"):
            here = scope["path"] + (f"?{scope['query_string'].decode('latin-1')}"
                                    if scope.get("query_string") else "")  # fmt: skip
            location = f"{realm.sign_in}?next={quote(here, safe='')}"
            head = [(b"location", location.encode("latin-1")), (b"cache-control", b"no-store"),
                    (b"content-length", b"0")]  # fmt: skip
            await send({"type": "http.response.start", "status": 303, "headers": head})
            await send({"type": "http.response.body", "body": b""})
            return
        info = ErrorInfo(code=ErrorCode.UNAUTHORIZED, message="sign in to the console first")
        await send_json(send, 401, self._body(scope["path"], info))

    def _body(self, path: str, info: ErrorInfo) -> dict[str, Any]:
        shape = _by_prefix(path, self.error_bodies)
        if shape is not None:
            return shape(info)
        return {"error": {"code": info.code.value, "message": info.message}}

    def _authenticate(self, header: str | None, peer: str) -> Principal:
        token = None
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
            token = value.strip()
        return check_token(self.auth, self.throttle, token, peer)

    def _check_host_and_origin(self, headers: dict[str, str], hosts: list[str]) -> str | None:
        if self.loopback:
            parsed = parse_host(hosts[0]) if len(hosts) == 1 else None
            if parsed is None or not is_loopback(parsed[0]):
                shown = ", ".join(repr(h[:100]) for h in hosts[:3]) or "no Host header"
                return f"this daemon answers only requests addressed to loopback, not {shown}"
        origin = headers.get("origin")
        if origin is None or origin.rstrip("/") in self.allowed_origins:
            return None
        if self.loopback and _is_own_loopback_origin(origin, self.port):
            return None
        return f"requests from the web origin {origin!r} are not allowed (EXAI_ALLOWED_ORIGINS)"


def _longest_first(table: Mapping[str, T] | None) -> list[tuple[str, T]]:
    """A prefix table, longest prefix first, so the most specific face wins."""
    return sorted((table or {}).items(), key=lambda kv: -len(kv[0]))


def _by_prefix(path: str, table: list[tuple[str, T]]) -> T | None:
    """The value of the first (longest) prefix ``path`` falls under."""
    return next((value for prefix, value in table if _under(path, (prefix,))), None)


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def _is_own_loopback_origin(origin: str, port: int) -> bool:
    try:
        parts = urlsplit(origin)
        return (parts.scheme in ("http", "https") and parts.port == port
                and is_loopback(parts.hostname or ""))  # fmt: skip
    except ValueError:
        return False
