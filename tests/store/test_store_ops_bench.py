"""scripts/bench/store_ops.py measures on a real SQLite store (its figures not judged)."""

from __future__ import annotations

from scripts.bench.store_ops import measure


async def test_the_store_ops_benchmark_measures_each_kind_of_operation() -> None:
    figures = await measure(threads=3, sequential=2, concurrent=2)
    assert set(figures) == {"pair_us", "concurrent_append_us", "cpu_per_op_us"}
    assert all(value > 0 for value in figures.values())
