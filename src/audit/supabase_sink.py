"""The ``supabase`` sink: batch upserts into ``audit_events`` through supabase-py.

Each batch is one ``POST /rest/v1/audit_events?on_conflict=event_id`` with
``Prefer: return=minimal,resolution=ignore-duplicates``, i.e. ``INSERT ... ON
CONFLICT (event_id) DO NOTHING``: a batch sent again after a crash or a lost
response stores nothing twice. The client's own retries are off; the shipper
owns retrying, with backoff, for every sink alike.

PostgREST errors carry a code but not the HTTP status, and the status is what
says whether retrying can help, so the sink's HTTP client records it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
from postgrest import APIError
from postgrest.types import ReturnMethod
from supabase import AsyncClient, AsyncClientOptions, acreate_client

from exai.audit.events import to_row
from exai.audit.sinks import SinkRejected, SinkUnavailable, is_permanent_http_status

__all__ = ["SupabaseSink"]


class SupabaseSink:
    name = "supabase"

    def __init__(
        self, url: str, service_role_key: str, *, table: str = "audit_events",
        timeout_s: float = 30.0,
    ) -> None:  # fmt: skip
        self._url = url
        self._key = service_role_key
        self._table = table
        self._timeout_s = timeout_s
        self._http: httpx.AsyncClient | None = None
        self._client: AsyncClient | None = None
        self._last_status: int | None = None

    async def open(self) -> None:
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout_s),
            event_hooks={"response": [self._remember_status]},
        )
        options = AsyncClientOptions(
            httpx_client=self._http,
            postgrest_client_retry=False,
            auto_refresh_token=False,
            persist_session=False,
        )
        self._client = await acreate_client(self._url, self._key, options=options)

    async def _remember_status(self, response: httpx.Response) -> None:
        self._last_status = response.status_code

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        if self._client is None:
            await self.open()
        assert self._client is not None
        rows = [to_row(event) for event in events]
        self._last_status = None
        request = self._client.table(self._table).upsert(
            rows,
            on_conflict="event_id",
            ignore_duplicates=True,
            returning=ReturnMethod.minimal,
        )
        try:
            await request.execute()
        except APIError as exc:
            status = self._last_status
            reason = f"HTTP {status} {exc.code}: {exc.message}"
            if exc.details:
                reason += f" ({exc.details})"
            if status is not None and is_permanent_http_status(status):
                raise SinkRejected(reason) from exc
            raise SinkUnavailable(reason) from exc
        except httpx.HTTPError as exc:
            raise SinkUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        self._http = None
        self._client = None
