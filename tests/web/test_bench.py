"""The OpenAI endpoint benchmark runs end to end and reports its figures (tiny sample sizes)."""

from __future__ import annotations

from scripts.bench.openai_endpoint import report, run


async def test_openai_endpoint_benchmark_reports_added_latency():
    results = await run(n=10, rounds=2, warmup=1)
    paths = ("direct", "stateless", "new_thread", "direct_streamed", "streamed")
    assert [results[path]["n"] for path in paths] == [10] * len(paths)
    stateless = results["stateless"]
    assert stateless["added_p50_ms"] == stateless["p50_ms"] - results["direct"]["p50_ms"]
    table = report(results)
    assert "| through exai, no thread (`completion`)" in table and "added at p50" in table
