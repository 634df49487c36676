"""Audit cost on the call path: ``chat`` latency with the audit trail off,
shipping to a healthy Supabase, and with Supabase hanging on every request.

The provider emulator answers at low latency so that any cost the audit trail
adds would show. Each configuration runs its own daemon subprocess; the
PostgREST test fixture stands in for Supabase. Target: p50 and p99 of the two
audited runs within 5% of the run without auditing, and (checked here) every
event of the healthy run delivered.

Run: ``python -m scripts.bench.audit_latency``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from exai.audit.events import COLUMNS
from exai.client import ExaiClient
from exai.emulators.postgrest import PostgrestEmulator, Table
from exai.emulators.provider import EmulatorServer
from scripts.bench.common import daemon_process, summarize

__all__ = ["main"]

_KEY = "bench-service-role-key-0123456789"


async def _measure(url: str, calls: int) -> dict[str, Any]:
    samples = []
    async with ExaiClient(url, client_name="bench") as client:
        for i in range(20):  # warm up
            await client.call("chat", {"prompt": f"warm {i}"})
        for i in range(calls):
            start = time.perf_counter()
            res = await client.call("chat", {"prompt": f"measured call {i}"})
            samples.append(time.perf_counter() - start)
            if res.error is not None:
                raise RuntimeError(f"call failed: {res.error}")
    return summarize(samples)


async def run(calls: int = 400, provider_latency_ms: float = 5.0) -> dict[str, Any]:
    provider = EmulatorServer(latency_ms=provider_latency_ms).start()
    supabase = PostgrestEmulator({"audit_events": Table(columns=(*COLUMNS, "data"),
                                                        key=("event_id",))}).start()  # fmt: skip
    common = {"KIMI_API_KEY": "sk-bench", "KIMI_BASE_URL": provider.base_url_kimi,
              "EXAI_DEFAULT_MODEL": "kimi-k2-0905-preview"}  # fmt: skip
    audited = {**common, "EXAI_AUDIT_ENABLED": "true", "EXAI_AUDIT_SINK": "supabase",
               "SUPABASE_URL": supabase.url, "SUPABASE_SERVICE_ROLE_KEY": _KEY}  # fmt: skip
    results: dict[str, Any] = {}
    try:
        async with daemon_process(**common) as (url, _):
            results["off"] = await _measure(url, calls)
        supabase.healthy()
        async with daemon_process(**audited) as (url, _):
            results["healthy"] = await _measure(url, calls)
        results["healthy"]["events_delivered"] = len(supabase.rows("audit_events"))
        supabase.hang()
        async with daemon_process(**audited) as (url, _):
            results["hanging"] = await _measure(url, calls)
    finally:
        supabase.stop()
        provider.stop()
    return results


def report(r: dict[str, Any]) -> str:
    off = r["off"]
    rows = ["| audit trail | p50 | p99 | p50 vs off | p99 vs off |", "|---|---|---|---|---|"]
    for name, label in (("off", "off"), ("healthy", "Supabase healthy"),
                        ("hanging", "Supabase hanging")):  # fmt: skip
        x = r[name]
        rows.append(f"| {label} | {x['p50_ms']:.2f} ms | {x['p99_ms']:.2f} ms | "
                    f"{(x['p50_ms'] / off['p50_ms'] - 1) * 100:+.1f}% | "
                    f"{(x['p99_ms'] / off['p99_ms'] - 1) * 100:+.1f}% |")  # fmt: skip
    rows.append(f"\nEvents delivered to the PostgREST fixture in the healthy run: "
                f"{r['healthy']['events_delivered']}.")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## Audit trail cost on chat calls\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
