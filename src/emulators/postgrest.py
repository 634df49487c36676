"""A PostgREST look-alike for tests: ``POST /rest/v1/{table}`` as Supabase answers it.

TEST FIXTURE, not a server to run anything against. It lets the real
``supabase`` client talk to something local, so the audit trail's Supabase
sink is tested through the same library, headers and status codes it meets
in production, and lets a test break the server on purpose.

What it models:

- ``apikey`` / ``Authorization: Bearer`` checked against ``api_key`` (401 otherwise);
- ``Prefer``: ``return=minimal|representation``, ``resolution=ignore-duplicates|
  merge-duplicates``, ``missing=default``; ``Preference-Applied`` in the answer;
- ``on_conflict`` and ``columns`` query parameters; an object or an array body;
- storing rows keyed by the table's key, atomically per request: a duplicate
  without a resolution is 409 ``23505`` and stores nothing;
- error bodies ``{code, message, details, hint}`` with PostgREST's codes:
  ``PGRST102`` invalid body, ``PGRST204`` unknown column, ``PGRST205`` unknown
  table, ``42P10`` bad ``on_conflict``, ``23502`` null in a required column.

Switches (thread-safe, callable from the test while the server runs):
:meth:`fail` (5xx), :meth:`hang` (accept, never answer until released),
:meth:`refuse` (stop listening: connections are refused), :meth:`reject`
(a 4xx, optionally only for matching batches), :meth:`healthy` (back to
normal, releasing hung requests, which are then processed: a late answer),
and ``latency_s``. Every request is recorded in :attr:`requests`.

It runs uvicorn on its own thread and event loop, on an ephemeral port of
127.0.0.1 that stays the same across :meth:`refuse` / :meth:`healthy`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from exai.emulators.serving import ServedApp, serve_in_thread

__all__ = ["Fault", "PostgrestEmulator", "RecordedRequest", "Table"]

Rows = list[dict[str, Any]]

_DB_DOWN = (
    "Could not connect with the database due to an incorrect db-uri or due to the "
    "PostgreSQL service not running."
)
_NO_COLUMN = "Could not find the 'unexpected' column of 'audit_events' in the schema cache"


@dataclass(frozen=True)
class Table:
    """A table's shape: its columns, its conflict key and its NOT NULL columns."""

    columns: tuple[str, ...]
    key: tuple[str, ...] = ()
    required: frozenset[str] = frozenset()


@dataclass
class RecordedRequest:
    method: str
    path: str
    table: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int = 0

    @property
    def rows(self) -> Rows:
        if isinstance(self.body, list):
            return [row for row in self.body if isinstance(row, dict)]
        return [self.body] if isinstance(self.body, dict) else []

    @property
    def prefer(self) -> set[str]:
        return {p.strip() for p in self.headers.get("prefer", "").split(",") if p.strip()}


@dataclass
class Fault:
    kind: str  # "fail" | "hang" | "reject"
    status: int = 503
    body: dict[str, Any] = field(default_factory=dict)
    times: int | None = None
    match: Callable[[Rows], bool] | None = None


def _error(status: int, code: str, message: str, details: Any = None, hint: Any = None) -> Response:
    body = {"code": code, "details": details, "hint": hint, "message": message}
    return JSONResponse(body, status_code=status)


def _split_list(value: str) -> list[str]:
    return [part.strip().strip('"') for part in value.split(",") if part.strip()]


class PostgrestEmulator:
    """TEST FIXTURE: a local PostgREST endpoint with switches to misbehave."""

    def __init__(
        self,
        tables: Mapping[str, Table],
        *,
        api_key: str | None = None,
        schema: str = "public",
        host: str = "127.0.0.1",
    ) -> None:
        self.tables = dict(tables)
        self.api_key = api_key
        self.schema = schema
        self.host = host
        self.port = 0
        self.latency_s = 0.0
        self.requests: list[RecordedRequest] = []
        self._store: dict[str, dict[Any, dict[str, Any]]] = {name: {} for name in self.tables}
        self._lock = threading.Lock()
        self._fault: Fault | None = None
        self._release = threading.Event()
        self._served: ServedApp | None = None
        self.app = Starlette(
            routes=[Route("/rest/v1/{table}", self._handle, methods=["GET", "POST"])]
        )

    # --- lifecycle ------------------------------------------------------------

    @property
    def url(self) -> str:
        """The Supabase project URL to give ``acreate_client``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> PostgrestEmulator:
        if self._served is not None:
            return self
        self._served = serve_in_thread(
            self.app, f"postgrest-emulator:{self.port}", host=self.host, port=self.port,
            loop="asyncio", http="h11", timeout_graceful_shutdown=1,
        )  # fmt: skip
        self.port = self._served.port
        return self

    def stop(self) -> None:
        served, self._served = self._served, None
        if served is None:
            return
        self._release.set()
        served.stop()

    def __enter__(self) -> PostgrestEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- switches -------------------------------------------------------------

    def healthy(self) -> None:
        """Answer normally again (listening if refused), releasing hung requests."""
        with self._lock:
            self._fault = None
        self._release.set()
        self.start()

    def fail(
        self,
        status: int = 503,
        *,
        code: str = "PGRST000",
        message: str = _DB_DOWN,
        times: int | None = None,
    ) -> None:
        """Answer ``status`` (a 5xx) to the next ``times`` writes, or all if None."""
        body = {"code": code, "details": None, "hint": None, "message": message}
        self._set_fault(Fault("fail", status, body, times))

    def hang(self, *, times: int | None = None) -> None:
        """Accept requests and never answer them, until :meth:`healthy` or :meth:`stop`."""
        self._release.clear()
        self._set_fault(Fault("hang", times=times))

    def refuse(self) -> None:
        """Stop listening: new connections are refused, open ones are closed."""
        self._release.set()
        self.stop()

    def reject(
        self,
        status: int = 400,
        *,
        code: str = "PGRST204",
        message: str = _NO_COLUMN,
        details: Any = None,
        hint: Any = None,
        times: int | None = None,
        match: Callable[[Rows], bool] | None = None,
    ) -> None:
        """Answer a 4xx to writes (those whose rows satisfy ``match``, if given)."""
        body = {"code": code, "details": details, "hint": hint, "message": message}
        self._set_fault(Fault("reject", status, body, times, match))

    def _set_fault(self, fault: Fault) -> None:
        with self._lock:
            self._fault = fault

    def _take_fault(self, rows: Rows) -> Fault | None:
        with self._lock:
            fault = self._fault
            if fault is None or (fault.match is not None and not fault.match(rows)):
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._fault = None
            return fault

    # --- observation ----------------------------------------------------------

    def rows(self, table: str) -> Rows:
        """What the table holds now, in insertion order."""
        with self._lock:
            return [dict(row) for row in self._store[table].values()]

    def writes(self, table: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [
                r for r in self.requests
                if r.method == "POST" and (table is None or r.table == table)
            ]  # fmt: skip

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._store = {name: {} for name in self.tables}
            self._fault = None

    # --- the endpoint ---------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        table = request.path_params["table"]
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        record = RecordedRequest(
            method=request.method,
            path=request.url.path,
            table=table,
            query=dict(request.query_params),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )
        with self._lock:
            self.requests.append(record)
        response = await self._respond(request, record)
        record.status = response.status_code
        return response

    async def _respond(self, request: Request, record: RecordedRequest) -> Response:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        denied = self._check_key(record.headers)
        if denied is not None:
            return denied
        if record.table not in self.tables:
            return _error(
                404, "PGRST205",
                f"Could not find the table '{self.schema}.{record.table}' in the schema cache",
            )  # fmt: skip
        if request.method == "GET":
            return JSONResponse(self.rows(record.table))
        if isinstance(record.body, str) or record.body is None:
            return _error(400, "PGRST102", "Empty or invalid json")
        fault = self._take_fault(record.rows)
        if fault is not None and fault.kind == "hang":
            # Released from the test's thread, so a threading.Event, polled.
            while not self._release.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        elif fault is not None:
            return JSONResponse(fault.body, status_code=fault.status)
        return self._insert(record)

    def _check_key(self, headers: dict[str, str]) -> Response | None:
        if self.api_key is None:
            return None
        bearer = headers.get("authorization", "")
        if headers.get("apikey") != self.api_key or bearer not in ("", f"Bearer {self.api_key}"):
            return JSONResponse(
                {"message": "Invalid API key",
                 "hint": "Double check your Supabase `anon` or `service_role` API key."},
                status_code=401,
            )  # fmt: skip
        return None

    def _insert(self, record: RecordedRequest) -> Response:
        spec = self.tables[record.table]
        body = record.body
        rows: Rows = body if isinstance(body, list) else [body]
        if not all(isinstance(row, dict) for row in rows):
            return _error(400, "PGRST102", "All object keys must match")
        if "columns" in record.query:
            columns = _split_list(record.query["columns"])
        else:
            columns = list(rows[0]) if rows else []
            if any(set(row) != set(columns) for row in rows):
                return _error(400, "PGRST102", "All object keys must match")
        for column in columns:
            if column not in spec.columns:
                return _error(
                    400, "PGRST204",
                    f"Could not find the '{column}' column of '{record.table}' in the schema cache",
                )  # fmt: skip
        prefer = record.prefer
        resolution = next((p.split("=", 1)[1] for p in prefer if p.startswith("resolution=")), None)
        conflict = tuple(_split_list(record.query.get("on_conflict", ""))) or spec.key
        if "on_conflict" in record.query and set(conflict) != set(spec.key):
            return _error(
                400, "42P10",
                "there is no unique or exclusion constraint matching the ON CONFLICT specification",
            )  # fmt: skip
        new_rows = [{column: row.get(column) for column in columns} for row in rows]
        for row in new_rows:
            for column in spec.required:
                if row.get(column) is None:
                    return _error(
                        400, "23502",
                        f'null value in column "{column}" of relation "{record.table}" '
                        "violates not-null constraint",
                        details=f"Failing row contains ({', '.join(map(str, row.values()))}).",
                    )  # fmt: skip
        with self._lock:
            outcome = self._apply(record.table, conflict, new_rows, resolution)
        if isinstance(outcome, Response):
            return outcome
        applied = [p for p in prefer if p.split("=", 1)[0] in {"return", "resolution", "missing"}]
        headers = {"Content-Range": "*/*"}
        if applied:
            headers["Preference-Applied"] = ",".join(sorted(applied))
        if "return=representation" in prefer:
            return JSONResponse(outcome, status_code=201, headers=headers)
        return Response(status_code=201, headers=headers)

    def _apply(
        self, table: str, key: tuple[str, ...], rows: Rows, resolution: str | None
    ) -> Rows | Response:
        """Store ``rows`` all or nothing. Called with the lock held."""
        store = self._store[table]
        staged: dict[Any, dict[str, Any]] = {}
        affected: Rows = []
        for row in rows:
            ident = tuple(row.get(k) for k in key) if key else object()
            existing = staged.get(ident) or store.get(ident)
            if existing is not None:
                if resolution == "ignore-duplicates":
                    continue
                if resolution == "merge-duplicates":
                    if ident in staged:
                        return _error(
                            500, "21000",
                            "ON CONFLICT DO UPDATE command cannot affect row a second time",
                        )  # fmt: skip
                    merged = {**existing, **row}
                    staged[ident] = merged
                    affected.append(merged)
                    continue
                shown = ", ".join(str(row.get(k)) for k in key)
                return _error(
                    409, "23505",
                    f'duplicate key value violates unique constraint "{table}_pkey"',
                    details=f"Key ({', '.join(key)})=({shown}) already exists.",
                )  # fmt: skip
            staged[ident] = row
            affected.append(row)
        store.update(staged)
        return affected
