"""The shim benchmark runs end to end and reports its figures (tiny sample sizes)."""

from __future__ import annotations

from scripts.bench.shim import report, run


async def test_shim_benchmark_reports_added_latency():
    results = await run(n=20, sdk_n=10, rounds=2, warmup=2)
    assert results["direct"]["n"] == 20 and results["shim"]["n"] == 20
    assert results["sdk"]["n"] == 10
    assert results["added_p50_ms"] == results["shim"]["p50_ms"] - results["direct"]["p50_ms"]
    table = report(results)
    assert "| direct WebSocket call" in table and "Added by the shim at p50" in table
