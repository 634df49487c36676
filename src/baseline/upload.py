"""Uploading a run's summary to the Supabase table ``performance_baselines``.

One row per workload per run, keyed by ``(run_id, workload)``: uploading the
same result file twice stores nothing twice (``ON CONFLICT DO NOTHING`` through
PostgREST's ``Prefer: resolution=ignore-duplicates``). The credentials are the
audit sink's (``SUPABASE_URL``, ``SUPABASE_SERVICE_ROLE_KEY``): the table's row
level security lets only the service role insert. Only the summary travels;
per-call records stay in the local files.
"""

from __future__ import annotations

from typing import Any

import httpx

from exai.baseline.results import RunResult
from exai.baseline.stats import OVERALL

__all__ = ["TABLE", "UploadError", "summary_rows", "upload_summary"]

TABLE = "performance_baselines"


class UploadError(Exception):
    """The summary could not be stored; the message says why."""


def summary_rows(result: RunResult) -> list[dict[str, Any]]:
    run = result.run
    server = run.get("server") or {}
    context = {k: run.get(k) for k in ("name", "url", "duration_s", "parallel", "host", "aborted",
                                       "reconnects", "workload_file")}  # fmt: skip
    rows = []
    for label, s in result.summary.items():
        rows.append({
            "run_id": result.run_id,
            "workload": label,
            "tool": s.tool,
            "started_at": run.get("started_at"),
            "server_version": server.get("version"),
            "calls": s.calls,
            "ok": s.ok,
            "errors": s.errors,
            "success_rate": s.success_rate,
            "p50_ms": s.p50_ms,
            "p95_ms": s.p95_ms,
            "p99_ms": s.p99_ms,
            "max_ms": s.max_ms,
            "throughput_per_s": s.throughput_per_s,
            "retries": s.retries,
            "resends": s.resends,
            "errors_by_code": s.errors_by_code,
            "summary": s.to_dict(),
            "run": context if label == OVERALL else {},
        })  # fmt: skip
    return rows


async def upload_summary(
    result: RunResult,
    url: str,
    service_role_key: str,
    *,
    table: str = TABLE,
    timeout_s: float = 30.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Insert the summary rows; return how many were sent.

    ``transport`` replaces the network (tests pass ``httpx.MockTransport``).
    """
    from postgrest import APIError
    from postgrest.types import ReturnMethod
    from supabase import AsyncClientOptions, acreate_client

    rows = summary_rows(result)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), transport=transport) as http:
        options = AsyncClientOptions(httpx_client=http, postgrest_client_retry=False,
                                     auto_refresh_token=False, persist_session=False)  # fmt: skip
        try:
            client = await acreate_client(url, service_role_key, options=options)
            await (
                client.table(table)
                .upsert(
                    rows,
                    on_conflict="run_id,workload",
                    ignore_duplicates=True,
                    returning=ReturnMethod.minimal,
                )
                .execute()
            )
        except APIError as exc:
            code = f" ({exc.code})" if exc.code else ""
            raise UploadError(f"{table}: {exc.message}{code}") from None
        except httpx.HTTPError as exc:
            raise UploadError(f"{table}: {type(exc).__name__}: {exc}") from None
    return len(rows)
