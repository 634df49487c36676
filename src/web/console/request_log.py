"""The operator's Requests page: the request log as a table a person can scan.

One row per call (:mod:`exai.store.call_log`), newest first, read through the
port's ``request_log`` (which refuses, ``FORBIDDEN``, a principal without the
operator's view: 403 here). Everything is a plain GET, so every view is a link:

- ``/console/admin/requests``: the filter form (each column, and a time range as
  UTC times or epoch seconds), the table and an *Older* link carrying the page's
  keyset cursor (never an offset). *Newer* reloads the first page. With script,
  the first page follows new calls: it asks for ``?rows=1&after=TOP`` every few
  seconds and puts the rows it gets on top (``x-exai-top`` says the new TOP);
- ``/console/admin/requests.csv``: the same filters, every matching row,
  streamed page by page; a text cell that a spreadsheet would run as a formula
  (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) is
  prefixed with ``'``;
- ``/console/admin/requests/{id}``: one call, its audit events (when the
  trail is on), the turn it stored and its trace (``EXAI_TRACE_URL``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from exai.errors import ExaiError, ForbiddenError
from exai.port import REQUEST_LOG_FILTERS
from exai.web.console.app import PREFIX, Console, security_headers

__all__ = ["CSV_COLUMNS", "csv_cell", "parse_time", "routes"]

PAGE = f"{PREFIX}/admin/requests"
_PAGE_ROWS = 50
_CSV_PAGE = 1000


# The columns of an export (the console's CSV and ``exai requests --csv``), in order.
CSV_COLUMNS: Final = (
    "id", "at", "principal", "key_id", "face", "client", "tool", "model_asked", "model",
    "provider", "model_calls", "prompt_tokens", "completion_tokens", "currency", "cost",
    "latency_ms", "status", "error_code", "trace_id", "session_id", "request_id", "thread_id",
    "instance_id",
)  # fmt: skip
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell no spreadsheet runs: text starting like a formula gets
    a leading ``'``."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def routes(console: Console) -> list[BaseRoute]:
    face = _Requests(console)
    return [
        Route(PAGE, face.guarded(face.page), methods=["GET"]),
        Route(f"{PAGE}.csv", face.guarded(face.export), methods=["GET"]),
        Route(f"{PAGE}/{{row_id:int}}", face.guarded(face.detail), methods=["GET"]),
    ]


def parse_time(text: str) -> float | None:
    """A time from the filter form: epoch seconds, or an ISO 8601 date or time (UTC
    unless it says otherwise); None when empty. Raises ValueError otherwise."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class _Requests:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.reads = console.core.reads

    def guarded(self, page: Any) -> Any:
        async def run(request: Request) -> Response:
            try:
                return await page(request)
            except ForbiddenError as exc:
                return self.console.refused(request, 403, exc.message)
            except (ExaiError, ValueError) as exc:
                message = exc.message if isinstance(exc, ExaiError) else str(exc)
                return self.console.refused(request, 400, message)

        return run

    def _filters(self, request: Request) -> tuple[dict[str, Any], dict[str, str]]:
        """What to ask the log for, and the form's values as typed."""
        q = request.query_params
        typed = {name: q.get(name, "")[:256] for name in (*REQUEST_LOG_FILTERS, "since", "until")}
        filters: dict[str, Any] = {name: typed[name] for name in REQUEST_LOG_FILTERS}
        for name in ("since", "until"):
            try:
                filters[name] = parse_time(typed[name])
            except ValueError:
                raise ValueError(f"{name}: {typed[name][:40]!r} is not a time") from None
        return filters, typed

    async def page(self, request: Request) -> Response:
        q = request.query_params
        filters, typed = self._filters(request)
        principal = self.console.principal(request)
        after = q.get("after", "")
        query = {k: v for k, v in typed.items() if v}

        def filter_link(name: str, value: str) -> str:
            return f"{PAGE}?{urlencode({**query, name: value})}"

        if q.get("rows") and after.isdigit():  # the live tail's request
            found = await self.reads.request_log(principal, filters, after_id=int(after),
                                                 limit=200)  # fmt: skip
            html = self.console.fragment("_request_rows.html", rows=found["rows"], empty=False,
                                         filter_link=filter_link)  # fmt: skip
            headers = {**security_headers(), "x-exai-top": str(found["top"])}
            return HTMLResponse(html, headers=headers)
        before = q.get("before", "")[:64]
        found = await self.reads.request_log(principal, filters, before=before, limit=_PAGE_ROWS)
        return self.console.page(
            request,
            "admin_requests.html",
            rows=found["rows"],
            typed=typed,
            top=found["top"],
            first=not before,
            older=f"{PAGE}?{urlencode({**query, 'before': found['next']})}"
            if found["next"]
            else None,
            newer=f"{PAGE}?{urlencode(query)}" if before else None,
            csv=f"{PAGE}.csv?{urlencode(query)}",
            filter_link=filter_link,
            empty=True,
        )

    async def export(self, request: Request) -> Response:
        filters, _ = self._filters(request)
        principal = self.console.principal(request)
        # Asked once before the response starts, so a refusal is a page, not a cut stream.
        first = await self.reads.request_log(principal, filters, limit=_CSV_PAGE)

        async def lines() -> AsyncIterator[str]:
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow(CSV_COLUMNS)
            found = first
            while True:
                for row in found["rows"]:
                    at = datetime.fromtimestamp(row["at"], UTC).isoformat(timespec="milliseconds")
                    writer.writerow([csv_cell(at if c == "at" else row.get(c))
                                     for c in CSV_COLUMNS])  # fmt: skip
                yield out.getvalue()
                out.seek(0)
                out.truncate()
                if not found["next"]:
                    return
                found = await self.reads.request_log(principal, filters, before=found["next"],
                                                     limit=_CSV_PAGE)  # fmt: skip

        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        headers = {
            **security_headers(),
            "content-disposition": f'attachment; filename="exai-requests-{stamp}.csv"',
        }
        return StreamingResponse(lines(), media_type="text/csv; charset=utf-8", headers=headers)

    async def detail(self, request: Request) -> Response:
        principal = self.console.principal(request)
        found = await self.reads.request_call(principal, int(request.path_params["row_id"]))
        if found is None:
            return self.console.refused(request, 404, "no such call in the request log")
        return self.console.page(request, "admin_request.html", call=found["call"],
                                 turn=found["turn"], events=found["events"],
                                 back=PAGE)  # fmt: skip
