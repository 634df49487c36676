"""The audit trail benchmark runs end to end at a tiny size (``make bench`` runs it
at full size): ``emit`` with the trail off, healthy and with the sink hanging,
the ingest into the outbox, and shipping into the PostgREST fixture. The
benchmark itself checks that every event reached the outbox and the fixture,
and raises if one did not."""

from __future__ import annotations

from scripts.bench.audit_outbox import _run, _table


async def test_the_audit_outbox_benchmark_stores_and_ships_every_event():
    results = await _run(events=1_000, ship_events=300, batch_sizes=[100], stop_timeout_s=1.0)
    assert set(results["emit"]) == {"off", "healthy", "hanging"}
    assert all(figures["p50_us"] > 0 for figures in results["emit"].values())
    assert results["ingest"]["ingest_rate"] > 0
    (ship,) = results["shipping"]
    assert ship["batch_size"] == 100 and ship["requests"] >= 3  # 300 events, 100 a batch
    assert "ingest rate emit -> outbox (1,000 events)" in _table(results)
