"""Who may use the HTTP faces: a bearer token, a trusted Host and Origin.

Every route but ``/health`` needs ``Authorization: Bearer <token or JWT>``,
checked by the same :class:`~exai.auth.Authenticator` as the WebSocket
``hello``, so a token means the same principal and scopes on both. A refusal is
401 with a ``WWW-Authenticate`` header, as RFC 6750 asks; failed attempts count
against the same per-address allowance as failed WebSocket logins
(:class:`~exai.admission.Admission`), and once it is spent requests
from that address are refused without their token being checked.

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
from typing import Any
from urllib.parse import urlsplit

from exai.auth import Authenticator, Principal
from exai.errors import UnauthorizedError
from exai.files.roots import is_loopback
from exai.protocol import ErrorCode, ErrorInfo
from exai.web.asgi import headers_of, send_json

__all__ = ["ErrorBody", "Guard", "parse_host", "principal_of"]

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
ErrorBody = Callable[[ErrorInfo], dict[str, Any]]
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
        error_bodies: Mapping[str, ErrorBody] | None = None,
        api_key_paths: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.auth = auth
        self.loopback = is_loopback(host)
        self.port = port
        self.allowed_origins = {o.rstrip("/") for o in allowed_origins}
        self.open_paths = open_paths
        self.throttle = throttle
        # Longest prefix first, so the most specific face's shape wins.
        self.error_bodies = sorted((error_bodies or {}).items(), key=lambda kv: -len(kv[0]))
        self.api_key_paths = api_key_paths

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
        if scope["path"] not in self.open_paths:
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
                challenge = 'Bearer realm="exai", error="invalid_token"'
                if header is None:
                    challenge = 'Bearer realm="exai"'
                body = self._body(scope["path"], exc.info())
                await send_json(send, 401, body, {"www-authenticate": challenge})
                return
            scope.setdefault("state", {})[_STATE_KEY] = principal
        await self.app(scope, receive, send)

    def _body(self, path: str, info: ErrorInfo) -> dict[str, Any]:
        for prefix, shape in self.error_bodies:
            if _under(path, (prefix,)):
                return shape(info)
        return {"error": {"code": info.code.value, "message": info.message}}

    def _authenticate(self, header: str | None, peer: str) -> Principal:
        token = None
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
            token = value.strip()
        if self.throttle is not None and (wait_s := self.throttle.login_wait_s(peer)) > 0:
            # Refused unchecked, the right token too: this is what guessing looks like.
            raise UnauthorizedError(
                f"too many failed logins from {peer}; try again in {wait_s:.0f} s"
            )
        try:
            return self.auth.authenticate(token)
        except UnauthorizedError:
            if self.throttle is not None and token is not None:
                self.throttle.login_failed(peer)
            raise

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


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def _is_own_loopback_origin(origin: str, port: int) -> bool:
    try:
        parts = urlsplit(origin)
        return (parts.scheme in ("http", "https") and parts.port == port
                and is_loopback(parts.hostname or ""))  # fmt: skip
    except ValueError:
        return False
