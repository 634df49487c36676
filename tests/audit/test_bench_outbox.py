"""The audit trail benchmark runs end to end at a tiny size (``make bench`` runs it
at full size): ``emit`` with the trail off, healthy and with the sink hanging,
the ingest into the outbox, and shipping into the PostgREST fixture. The
benchmark itself checks that every event reached the outbox and the fixture,
and raises if one did not; the test checks that each figure was measured on what
its name says, from what each trail it made had recorded and shipped."""

from __future__ import annotations

from typing import Any

import pytest

from exai.audit import AuditTrail
from scripts.bench import audit_outbox
from scripts.bench.audit_outbox import _run, _table


class RecordingTrail(AuditTrail):
    """The benchmark's trail, counting its emits and keeping its stats once stopped."""

    made: list[RecordingTrail]

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.emitted = 0
        self.final: dict[str, Any] = {}
        self.made.append(self)

    def emit(self, kind: str, /, **fields: Any) -> None:
        self.emitted += 1
        super().emit(kind, **fields)

    async def stop(self, *args: Any, **kw: Any) -> None:
        await super().stop(*args, **kw)
        self.final = self.stats()


async def test_the_audit_outbox_benchmark_stores_and_ships_every_event(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(RecordingTrail, "made", [], raising=False)
    monkeypatch.setattr(audit_outbox, "AuditTrail", RecordingTrail)
    results = await _run(events=1_000, ship_events=300, batch_sizes=[100], stop_timeout_s=1.0)
    off, healthy, hanging, ingest, shipping = RecordingTrail.made

    # Each emit figure times 200 emits (a fifth of the events) on the trail its name says.
    assert set(results["emit"]) == {"off", "healthy", "hanging"}
    assert [trail.emitted for trail in (off, healthy, hanging)] == [200, 200, 200]
    assert not off.enabled and (off.final["backlog"], off.final["shipped"]) == (0, 0)
    assert healthy.final["shipped"] + healthy.final["backlog"] == 200  # none lost
    assert healthy.final["dropped"] == 0
    assert (hanging.final["shipped"], hanging.final["backlog"]) == (0, 200)  # it did hang
    # The ingest figure is of every event into the outbox, none shipped away meanwhile.
    assert ingest.emitted == 1_000
    assert (ingest.final["backlog"], ingest.final["shipped"]) == (1_000, 0)
    # Shipping drains a pre-filled outbox of 300 events, 100 a request.
    (ship,) = results["shipping"]
    assert (shipping.emitted, shipping.final["shipped"], shipping.final["backlog"]) == (0, 300, 0)
    assert ship["batch_size"] == 100 and ship["requests"] >= 3
    assert "ingest rate emit -> outbox (1,000 events)" in _table(results)
