"""The console's plumbing: sessions, templates, forms, security headers, tool calls.

:class:`Console` is what the HTTP face mounts under ``/console``: its
:meth:`~Console.routes` (the pages, from :mod:`.signin`, :mod:`.threads`,
:mod:`.jobs`, :mod:`.memories`, :mod:`.spend`, :mod:`.operator` and
:mod:`.request_log`) and the
:class:`~exai.web.guard.CookieRealm` through which the guard authenticates them
by their session cookie. The pages share what is here:

- :meth:`~Console.page` renders a template into a response carrying the
  console's security headers: a Content-Security-Policy that allows scripts,
  styles and requests from this origin only (no inline script, no inline
  style, no framing, forms posting only here), ``nosniff``, no referrer sent
  to other sites, no caching of pages that hold a person's data;
- :meth:`~Console.form` reads a POSTed form, bounded in size, and refuses it
  (403) unless it carries the session's CSRF token;
- :meth:`~Console.call` runs a tool as the signed-in principal through the
  core's port, so scopes, limits, budgets and audit apply as on every face.

Nothing here decides what a page shows: :mod:`.views` does, without I/O.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from exai.auth import Principal
from exai.port import Port
from exai.protocol import CallToolResult, ErrorCode, ErrorInfo
from exai.web.asgi import BodyTooLarge, headers_of, read_body
from exai.web.console.markdown import render_markdown
from exai.web.console.sessions import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    ConsoleSession,
    cookie_value,
    tokens_match,
)
from exai.web.console.sign_ins import SignIns
from exai.web.console.views import ago, iso, money, session_label, when
from exai.web.guard import CookieRealm, principal_of

__all__ = ["PREFIX", "Console", "security_headers", "signed_in"]

PREFIX = "/console"
HERE = Path(__file__).parent
MAX_FORM_BYTES = 256 * 1024
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Tools a page needs that a daemon's profile may leave out, and what turns them on.
_JOB_TOOLS = frozenset({"schedule", "jobs", "unschedule"})


def signed_in(request: Request) -> Principal | None:
    """The principal the guard authenticated, or None on the open pages."""
    try:
        return principal_of(request.scope)
    except KeyError:
        return None


def security_headers(*, cache: bool = False) -> dict[str, str]:
    return {
        "content-security-policy": _CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",
        "x-frame-options": "DENY",
        "cache-control": "private, max-age=3600" if cache else "no-store",
    }


class Console:
    def __init__(self, core: Port) -> None:
        self.core = core
        self.sessions = SignIns(core.sign_ins, core.settings.console_session_ttl_s,
                                core.credential_problem)  # fmt: skip
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["when"] = when
        self.templates.filters["iso"] = iso
        self.templates.filters["ago"] = lambda ts: ago(ts, time.time())
        self.templates.filters["session_label"] = session_label
        self.templates.filters["money"] = money
        self.templates.filters["markdown"] = render_markdown
        trace_url = core.settings.trace_url
        # A turn's trace id as a link into the operator's tracing UI, when one is set.
        self.templates.globals["trace_link"] = lambda trace_id: (
            trace_url.replace("{trace_id}", trace_id) if trace_url else None
        )
        self.secure = (core.public_url or core.settings.public_url or "").startswith("https:")
        self._static = {
            path.name: path.read_bytes()
            for path in (HERE / "static").iterdir()
            if path.suffix in _STATIC_TYPES
        }

    # --- what the HTTP face mounts ----------------------------------------------------

    def realm(self) -> CookieRealm:
        return CookieRealm(
            prefix=PREFIX,
            principal=self._principal_of_headers,
            sign_in=f"{PREFIX}/login",
            open_paths=frozenset({f"{PREFIX}/login"}),
            open_prefixes=(f"{PREFIX}/static/",),
        )

    def own_routes(self) -> list[BaseRoute]:
        """The console's own routes (its home and static files); the pages' are theirs
        (:func:`exai.web.console.pages.routes` puts them together)."""
        return [
            Route(PREFIX, self._home, methods=["GET"]),
            Route(f"{PREFIX}/", self._home, methods=["GET"]),
            Route(f"{PREFIX}/static/{{name}}", self._static_file, methods=["GET"]),
        ]

    def saving_flashes(self, routes: list[BaseRoute]) -> list[BaseRoute]:
        """``routes``, each writing the session's changed flashes back to the store."""
        for route in routes:
            if isinstance(route, Route):
                route.app = self._saving_flashes(route.app)
        return routes

    def _saving_flashes(self, app: Any) -> Any:
        """``app``, writing the session's changed flashes back to the store as its
        response starts: the page after a redirect may be served by another daemon."""

        async def run(scope: Any, receive: Any, send: Any) -> None:
            async def send_saved(message: Any) -> None:
                if message["type"] == "http.response.start":
                    cookie = cookie_value(headers_of(scope), COOKIE)
                    session = self.sessions.get(cookie, time.time())
                    if session is not None:
                        await self.sessions.save(session)
                await send(message)

            await app(scope, receive, send_saved)

        return run

    async def _principal_of_headers(self, headers: dict[str, str]) -> Principal | None:
        session = await self.sessions.check(cookie_value(headers, COOKIE), time.time())
        return session.principal if session is not None else None

    async def _home(self, request: Request) -> Response:
        return self.redirect(f"{PREFIX}/threads")

    async def _static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        body = self._static.get(name)
        if body is None:
            return Response("not found", status_code=404, headers=security_headers())
        return Response(
            body, media_type=_STATIC_TYPES[Path(name).suffix], headers=security_headers(cache=True)
        )

    # --- what the pages use -------------------------------------------------------------

    def session(self, request: Request) -> ConsoleSession:
        """The signed-in session of a request the guard let through."""
        session = self.sessions.get(cookie_value(headers_of(request.scope), COOKIE), time.time())
        if session is None:  # signed out between the guard's check and now
            raise PermissionError("not signed in")
        return session

    def principal(self, request: Request) -> Principal:
        return principal_of(request.scope)

    def page(
        self, request: Request, template: str, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        principal = signed_in(request)
        session = None
        if principal is not None:
            session = self.sessions.get(
                cookie_value(headers_of(request.scope), COOKIE), time.time()
            )
        html = self.templates.get_template(template).render(
            principal=principal,
            admin=principal is not None and self.core.reads.is_admin(principal),
            csrf=session.csrf if session is not None else "",
            flashes=session.take_flashes() if session is not None else [],
            path=request.url.path,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=security_headers())

    def fragment(self, template: str, **context: Any) -> str:
        return self.templates.get_template(template).render(**context)

    def redirect(self, url: str) -> Response:
        return RedirectResponse(url, status_code=303, headers=security_headers())

    def refused(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.page(request, "error.html", status=status, message=message)

    async def form(self, request: Request, *, csrf: bool = True) -> dict[str, str] | None:
        """The POSTed form's fields, or None when the request must be refused (no or a
        wrong CSRF token, too large, not a form); :meth:`refusal` says why."""
        headers = headers_of(request.scope)
        try:
            body = await read_body(request.receive, headers, MAX_FORM_BYTES)
        except BodyTooLarge:
            request.state.refusal = (413, f"the form is over {MAX_FORM_BYTES // 1024} KiB")
            return None
        if body is None:
            request.state.refusal = (400, "the request ended before its form")
            return None
        try:
            fields = dict(
                parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=200)
            )
        except (UnicodeDecodeError, ValueError):
            request.state.refusal = (400, "the request body is not a form")
            return None
        if csrf:
            session = self.sessions.get(cookie_value(headers, COOKIE), time.time())
            given = headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
            if session is None or not tokens_match(session.csrf, given):
                request.state.refusal = (
                    403,
                    "this form is missing its CSRF token or it is "
                    "stale; reload the page and try again",
                )
                return None
        fields.pop(CSRF_FIELD, None)
        return fields

    def refusal(self, request: Request) -> HTMLResponse:
        status, message = getattr(request.state, "refusal", (400, "bad request"))
        return self.refused(request, status, message)

    async def call(
        self, request: Request, tool: str, arguments: dict[str, Any], **options: Any
    ) -> CallToolResult:
        """Run ``tool`` as the signed-in principal, through the core's port."""
        caller = self.core.connect(principal_of(request.scope), face="console")
        try:
            return await caller.call(tool, arguments, **options)
        finally:
            caller.close()

    def explain(self, tool: str, error: ErrorInfo) -> str:
        """A tool's error as the console shows it, with what to do about it."""
        text = f"{error.code.value}: {error.message}"
        if error.code == ErrorCode.TOOL_NOT_FOUND and tool in _JOB_TOOLS:
            text += (
                " (this daemon does not offer the job tools: the operator can set "
                "EXAI_TOOL_PROFILE=full or EXAI_TOOLS_ALLOW=schedule,jobs,unschedule)"
            )
        elif error.code == ErrorCode.FORBIDDEN:
            text += " (your token's scopes do not include this tool)"
        return text
