"""Signing in to the console and out of it.

``GET /console/login`` shows the form (open to anyone, like the static files
it needs); ``POST /console/login`` checks the exai token or JWT with the same
authenticator and the same failed-login allowance as the WebSocket ``hello``
and the bearer checks (:func:`exai.web.guard.check_token`), then sets the
session cookie and returns to the page the person was sent from (``next``,
only ever a page of the console). The form carries a token of its own that
must match a short-lived cookie (double submit), so another site cannot sign
a browser in under someone else's name. Sign-ins and failed attempts are
audited (``connection_opened`` / ``auth_failed`` with ``face: "console"``); the
session appears there under a public id, never its cookie.
"""

from __future__ import annotations

import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from exai.errors import UnauthorizedError
from exai.logs import get_logger
from exai.web.asgi import headers_of
from exai.web.console.app import PREFIX, Console, security_headers
from exai.web.console.sessions import (
    COOKIE,
    LOGIN_COOKIE,
    LOGIN_TTL_S,
    cookie_header,
    cookie_value,
    tokens_match,
)
from exai.web.console.views import safe_next
from exai.web.guard import check_token

__all__ = ["routes"]

log = get_logger("exai.web.console")


def routes(console: Console) -> list[BaseRoute]:
    face = _SignIn(console)
    return [
        Route(f"{PREFIX}/login", face.form, methods=["GET"]),
        Route(f"{PREFIX}/login", face.sign_in, methods=["POST"]),
        Route(f"{PREFIX}/logout", face.sign_out, methods=["POST"]),
        Route(f"{PREFIX}/session", face.whoami, methods=["GET"]),
    ]


class _SignIn:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.core = console.core

    def _form(
        self, request: Request, *, status: int = 200, error: str = "", then: str | None = None
    ) -> Response:
        target = safe_next(then if then is not None else request.query_params.get("next"))
        token = secrets.token_urlsafe(24)
        response = self.console.page(
            request,
            "login.html",
            status=status,
            next=target,
            login_token=token,
            error=error,
            open_daemon=self.core.auth.open,
        )
        response.headers.append(
            "set-cookie",
            cookie_header(
                LOGIN_COOKIE,
                token,
                max_age=LOGIN_TTL_S,
                path=f"{PREFIX}/login",
                secure=self.console.secure,
            ),
        )
        return response

    async def form(self, request: Request) -> Response:
        return self._form(request)

    async def sign_in(self, request: Request) -> Response:
        fields = await self.console.form(request, csrf=False)
        if fields is None:
            return self.console.refusal(request)
        expected = cookie_value(headers_of(request.scope), LOGIN_COOKIE)
        if expected is None or not tokens_match(expected, fields.get("login_token")):
            return self._form(
                request,
                status=403,
                error="The sign-in form had expired or did "
                "not come from this page; please sign in again.",
                then=fields.get("next"),
            )
        peer = request.client.host if request.client else "?"
        token = fields.get("token", "").strip() or None
        try:
            principal = check_token(self.core.auth, self.core.admission, token, peer)
        except UnauthorizedError as exc:
            self.core.emit("auth_failed", peer=peer, reason=exc.message, face="console")
            return self._form(
                request, status=401, error=f"Not signed in: {exc.message}", then=fields.get("next")
            )
        try:
            session = await self.console.sessions.sign_in(principal, time.time())
        except Exception as exc:
            log.warning("keeping a console sign-in failed", error=f"{type(exc).__name__}: {exc}")
            return self._form(
                request,
                status=503,
                error="The sign-in could not be kept (the store did not answer); "
                "please try again in a moment.",
                then=fields.get("next"),
            )
        self.core.emit(
            "connection_opened",
            session_id=session.public_id,
            principal=principal.name,
            peer=peer,
            face="console",
        )
        target = safe_next(fields.get("next"))
        response = self.console.redirect(target)
        response.headers.append(
            "set-cookie",
            cookie_header(
                COOKIE,
                session.id,
                max_age=session.expires_at - time.time(),
                secure=self.console.secure,
            ),
        )
        response.headers.append(
            "set-cookie",
            cookie_header(
                LOGIN_COOKIE, "", max_age=0, path=f"{PREFIX}/login", secure=self.console.secure
            ),
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        fields = await self.console.form(request)
        if fields is None:
            return self.console.refusal(request)
        session = await self.console.sessions.sign_out(self.console.session(request).id)
        if session is not None:
            self.core.emit(
                "connection_closed",
                session_id=session.public_id,
                principal=session.principal.name,
                face="console",
            )
        response = self.console.redirect(f"{PREFIX}/login")
        response.headers.append(
            "set-cookie", cookie_header(COOKIE, "", max_age=0, secure=self.console.secure)
        )
        return response

    async def whoami(self, request: Request) -> Response:
        """Who the cookie signs in: the sign-in page asks, to go on at once when a
        notification's link arrived from another site without the cookie."""
        principal = self.console.principal(request)
        return JSONResponse({"principal": principal.name}, headers=security_headers())
