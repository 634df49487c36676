"""The scheduler-tick benchmark runs end to end on both stores (a tiny case; the
figures themselves are not judged): its seed follows the jobs table as it grows."""

from __future__ import annotations

import uuid

import pytest

from scripts.bench.jobs_tick import run


@pytest.mark.postgres
async def test_the_tick_benchmark_claims_every_due_run_on_both_stores(postgres_server):
    url = postgres_server.create_database(f"tick_{uuid.uuid4().hex[:12]}")
    results = await run(cases=[("30 jobs, 5 due", 30, 5)], ticks=2, postgres_url=url)
    assert sorted(results) == ["postgres", "sqlite"]
    for backend in results.values():
        assert backend["30 jobs, 5 due"]["p50_ms"] > 0
