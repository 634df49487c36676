"""Audit cost on the call path: ``chat`` latency with the audit trail off,
shipping to a healthy Supabase, and with Supabase hanging on every request.

The provider emulator answers at low latency so that any cost the audit trail
adds would show. Each configuration runs its own daemon subprocess; the
PostgREST test fixture stands in for Supabase. Each fixture runs in a process
of its own (:mod:`scripts.bench.fixtures`), so that receiving audit batches is
not counted against the daemon by sharing the measuring client's process.
The three configurations take turns for two rounds and each one's samples are
pooled (1,000 calls each), so a burst of load from elsewhere on the machine
lands on all of them. Target: p50 and p99 of the two audited runs within 5% of
the run without auditing, and (checked here) every event of the healthy runs
delivered.

Run: ``python -m scripts.bench.audit_latency``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from exai.client import ExaiClient
from scripts.bench.common import daemon_process, summarize
from scripts.bench.fixtures import FixtureProcess

__all__ = ["main"]

_KEY = "bench-service-role-key-0123456789"


async def _measure(url: str, calls: int) -> list[float]:
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
    return samples


async def run(
    calls: int = 500, rounds: int = 2, provider_latency_ms: float = 5.0
) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"off": [], "healthy": [], "hanging": []}
    async with (
        FixtureProcess("provider", provider_latency_ms) as provider,
        FixtureProcess("supabase") as fixtures,
    ):
        common = {"KIMI_API_KEY": "sk-bench", "KIMI_BASE_URL": provider.urls["kimi"],
                  "EXAI_DEFAULT_MODEL": "kimi-k2.6"}  # fmt: skip
        audited = {**common, "EXAI_AUDIT_ENABLED": "true", "EXAI_AUDIT_SINK": "supabase",
                   "SUPABASE_URL": fixtures.urls["supabase"],
                   "SUPABASE_SERVICE_ROLE_KEY": _KEY}  # fmt: skip
        for _ in range(rounds):
            async with daemon_process(**common) as (url, _):
                samples["off"] += await _measure(url, calls)
            await fixtures.command("healthy")
            async with daemon_process(**audited) as (url, _):
                samples["healthy"] += await _measure(url, calls)
            delivered = await fixtures.command("rows audit_events")
            await fixtures.command("hang")
            async with daemon_process(**audited) as (url, _):
                samples["hanging"] += await _measure(url, calls)
            await fixtures.command("healthy")  # let the hung requests go
    results: dict[str, Any] = {name: summarize(s) for name, s in samples.items()}
    results["healthy"]["events_delivered"] = delivered
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
    rows.append(f"\n{off['n']} calls per configuration. Events delivered to the PostgREST "
                f"fixture by the healthy runs: {r['healthy']['events_delivered']}.")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## Audit trail cost on chat calls\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
