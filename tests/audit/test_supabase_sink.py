"""The supabase sink, through the real supabase client, against the PostgREST emulator."""

from __future__ import annotations

import pytest

from exai.audit import COLUMNS, AuditOutbox, AuditTrail
from exai.emulators.postgrest import PostgrestEmulator

from .conftest import SERVICE_KEY
from .helpers import stored_ids, wait_until


def emit_many(trail: AuditTrail, n: int, **fields: object) -> None:
    for i in range(n):
        trail.emit("call_finished", session_id="s1", request_id=f"r{i}", tool="chat",
                   duration_ms=i, status="ok", **fields)  # fmt: skip


async def test_batches_arrive_with_supabase_headers_and_rows(
    supabase_settings, postgrest: PostgrestEmulator
) -> None:
    trail = AuditTrail(supabase_settings(audit_batch_size=25), instance_id="inst-a")
    emit_many(trail, 60)
    await trail.start()
    await wait_until(lambda: trail.stats()["shipped"] == 60)
    await trail.stop()
    writes = postgrest.writes("audit_events")
    assert sorted(len(w.rows) for w in writes) == [10, 25, 25]
    for write in writes:
        assert write.status == 201
        assert write.headers["apikey"] == SERVICE_KEY
        assert write.headers["authorization"] == f"Bearer {SERVICE_KEY}"
        assert {"return=minimal", "resolution=ignore-duplicates"} <= write.prefer
        assert write.query["on_conflict"] == "event_id"
        for row in write.rows:
            assert set(row) == {*COLUMNS, "data"}
            assert row["kind"] == "call_finished" and row["instance_id"] == "inst-a"
            assert row["data"]["status"] == "ok" and "duration_ms" in row["data"]
    rows = postgrest.rows("audit_events")
    assert [r["request_id"] for r in rows] == [f"r{i}" for i in range(60)]


@pytest.mark.parametrize("outage", ["refuse", "fail", "hang"])
async def test_sink_down_then_back_delivers_every_event_exactly_once(
    supabase_settings, postgrest: PostgrestEmulator, outage: str
) -> None:
    trail = AuditTrail(supabase_settings(audit_batch_size=20), send_timeout_s=0.2,
                       backoff_max_s=0.05)  # fmt: skip
    getattr(postgrest, outage)()
    await trail.start()
    emit_many(trail, 100)
    await wait_until(lambda: trail.stats()["last_error"] is not None)
    await wait_until(lambda: trail.stats()["backlog"] == 100)
    emit_many(trail, 50, phase="during")
    postgrest.healthy()
    await wait_until(lambda: trail.stats()["backlog"] == 0)
    emitted = {e["event_id"] for e in _outbox_archive(trail)}
    await trail.stop()
    ids = stored_ids(postgrest)
    assert len(ids) == len(set(ids)) == 150
    assert set(ids) == emitted


def _outbox_archive(trail: AuditTrail) -> list[dict]:
    outbox = AuditOutbox(trail._settings.outbox_path, max_events=10**6)
    outbox.open()
    try:
        return outbox.recent(10**6)
    finally:
        outbox.close()


async def test_a_rejected_batch_is_quarantined_and_later_batches_still_ship(
    supabase_settings, postgrest: PostgrestEmulator
) -> None:
    settings = supabase_settings(audit_batch_size=5)
    postgrest.reject(400, code="PGRST204", match=lambda rows: any(
        r["data"].get("poison") for r in rows))  # fmt: skip
    trail = AuditTrail(settings)
    emit_many(trail, 12)
    trail.emit("call_finished", request_id="bad", poison=True)
    emit_many(trail, 12, phase="after")
    await trail.start()
    await wait_until(lambda: trail.stats()["backlog"] == 0)
    stats = trail.stats()
    await trail.stop()

    outbox = AuditOutbox(settings.outbox_path, max_events=1000)
    outbox.open()
    quarantined = outbox.quarantined_rows()
    every = [e["event_id"] for e in outbox.recent(1000)] + [q["event_id"] for q in quarantined]
    stored = set(stored_ids(postgrest))
    q_ids = {q["event_id"] for q in quarantined}
    assert stats["quarantined"] == len(quarantined) == 5
    assert "PGRST204" in quarantined[0]["reason"] and "HTTP 400" in quarantined[0]["reason"]
    assert any('"poison":true' in q["body"] for q in quarantined)
    assert stored.isdisjoint(q_ids) and stored | q_ids == set(every) and len(stored) == 20
    assert {r["request_id"] for r in postgrest.rows("audit_events")} >= {
        f"r{i}" for i in range(5, 12)
    }

    postgrest.healthy()
    assert outbox.resend() == 5
    outbox.close()
    again = AuditTrail(settings)
    await again.start()
    await wait_until(lambda: len(stored_ids(postgrest)) == 25)
    await again.stop()
