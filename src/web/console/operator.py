"""The operator's pages: the audit trail, the daemon's health and the settings in effect.

Each page asks a read that refuses (``FORBIDDEN``) a principal without the
operator's view, and answers 403 then; the navigation shows these pages only
to operators, but the check is the read's, not the link's. The audit page
filters by kind, principal and text and can follow new events: its script
asks for the rows again every few seconds (``?rows=1`` answers just the
table body).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from exai.errors import ForbiddenError
from exai.web.console.app import PREFIX, Console, security_headers

__all__ = ["routes"]

_SHOWN_FIELDS = (
    "ts",
    "kind",
    "principal",
    "tool",
    "session_id",
    "request_id",
    "thread_id",
    "event_id",
    "instance_id",
)


def routes(console: Console) -> list[BaseRoute]:
    face = _Operator(console)
    return [
        Route(f"{PREFIX}/admin", face.home, methods=["GET"]),
        Route(f"{PREFIX}/admin/audit", face.guarded(face.audit), methods=["GET"]),
        Route(f"{PREFIX}/admin/health", face.guarded(face.health), methods=["GET"]),
        Route(f"{PREFIX}/admin/settings", face.guarded(face.settings), methods=["GET"]),
    ]


def _event_row(event: dict[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in event.items() if k not in _SHOWN_FIELDS}
    return {**{k: event.get(k) for k in _SHOWN_FIELDS}, "rest": rest}


class _Operator:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    def guarded(
        self, page: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await page(request)
            except ForbiddenError as exc:
                return self.console.refused(request, 403, exc.message)

        return run

    async def home(self, request: Request) -> Response:
        return self.console.redirect(f"{PREFIX}/admin/health")

    async def audit(self, request: Request) -> Response:
        q = request.query_params
        filters = {
            "kind": q.get("kind", "")[:64],
            "who": q.get("who", "")[:200],
            "text": q.get("text", "")[:200],
        }
        try:
            limit = max(1, min(int(q.get("limit") or 100), 1000))
        except ValueError:
            limit = 100
        found = await self.reads.audit_events(
            self.console.principal(request), limit=limit, before=q.get("before", "")[:40], **filters
        )
        rows = [_event_row(e) for e in found["events"]]
        if q.get("rows"):
            html = self.console.fragment("_audit_rows.html", rows=rows)
            return HTMLResponse(html, headers=security_headers())
        return self.console.page(
            request,
            "admin_audit.html",
            rows=rows,
            filters=filters,
            limit=limit,
            enabled=found["enabled"],
            follow=bool(q.get("follow")),
        )

    async def health(self, request: Request) -> Response:
        data = await self.reads.health(self.console.principal(request))
        return self.console.page(
            request,
            "admin_health.html",
            ready=data["ready"],
            checks=data["checks"],
            stats=data["stats"],
        )

    async def settings(self, request: Request) -> Response:
        values = self.reads.settings_view(self.console.principal(request))
        return self.console.page(request, "admin_settings.html", values=sorted(values.items()))
