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
answers only requests addressed to a loopback ``Host``.

Each face answers in its own dialect: a refusal's body is exai's
``{"error": {"code", "message"}}`` unless the path falls under a prefix given
an ``error_bodies`` shaper, the longest such prefix winning (``/v1`` answers as
OpenAI does and ``/v1/messages`` as Anthropic does, so their clients raise their
usual exceptions). Under the ``api_key_paths`` prefixes (``/v1/messages``) the
token may also come as ``x-api-key``, the header Anthropic's clients send; a
request that carries both headers is checked on ``Authorization``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from exai.auth import Authenticator, Principal
from exai.errors import UnauthorizedError
from exai.files.roots import is_loopback
from exai.protocol import ErrorCode, ErrorInfo
from exai.web.asgi import headers_of, send_json

__all__ = ["ErrorBody", "Guard", "principal_of"]

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
ErrorBody = Callable[[ErrorInfo], dict[str, Any]]
_STATE_KEY = "exai_principal"


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
        refusal = self._check_host_and_origin(headers)
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

    def _check_host_and_origin(self, headers: dict[str, str]) -> str | None:
        if self.loopback:
            host = headers.get("host", "")
            if not is_loopback(urlsplit(f"//{host}").hostname or ""):
                return f"this daemon answers only requests addressed to loopback, not {host!r}"
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
