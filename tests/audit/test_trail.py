"""AuditTrail: emit never waits, memory reaches the outbox, limits drop and count."""

from __future__ import annotations

import inspect

import structlog

from exai.audit import AuditOutbox, AuditTrail
from exai.emulators.postgrest import PostgrestEmulator

from .helpers import stored_ids, wait_until


def outbox_status(settings):
    outbox = AuditOutbox(settings.outbox_path, max_events=settings.audit_max_outbox_events)
    outbox.open()
    try:
        return outbox.status()
    finally:
        outbox.close()


def test_emit_is_a_plain_function() -> None:
    assert not inspect.iscoroutinefunction(AuditTrail.emit)


async def test_emit_only_appends_while_the_sink_hangs(
    supabase_settings, postgrest: PostgrestEmulator
) -> None:
    postgrest.hang()
    trail = AuditTrail(supabase_settings(), send_timeout_s=60.0)
    await trail.start()
    for i in range(500):  # no await between emits: each one must return on its own
        assert trail.emit("call_started", request_id=str(i), tool="chat") is None
    assert trail.stats()["buffered"] == 500
    await wait_until(lambda: trail.stats()["buffered"] == 0 and bool(postgrest.writes()))
    stats = trail.stats()
    assert stats["backlog"] == 500 and stats["dropped"] == 0 and stats["shipped"] == 0
    assert stored_ids(postgrest) == []
    await trail.stop(timeout_s=0.5)
    assert outbox_status(supabase_settings()).backlog == 500


async def test_memory_beyond_the_limit_is_dropped_counted_and_logged(make_settings) -> None:
    settings = make_settings(audit_max_outbox_events=100)
    with structlog.testing.capture_logs() as logs:
        trail = AuditTrail(settings)
        for i in range(150):
            trail.emit("call_started", request_id=str(i))
        stats = trail.stats()
        assert (stats["buffered"], stats["dropped"]) == (100, 50)
        await trail.start()
        await wait_until(lambda: any("dropped" in e["event"] for e in logs))
        await trail.stop()
    [entry] = [e for e in logs if "dropped" in e["event"]]
    assert entry["log_level"] == "error" and entry["dropped"] == 50
    status = outbox_status(settings)
    assert status.dropped == 50 and status.shipped == 100


async def test_outbox_backlog_counts_towards_the_limit(make_settings, postgrest) -> None:
    settings = make_settings(
        audit_sink="supabase", supabase_url=postgrest.url,
        supabase_service_role_key="sb-service-role-key-for-tests-0123456789",
        audit_max_outbox_events=100,
    )  # fmt: skip
    postgrest.refuse()
    first = AuditTrail(settings)
    await first.start()
    for i in range(90):
        first.emit("call_started", request_id=str(i))
    await first.stop(timeout_s=1.0)
    second = AuditTrail(settings)
    await second.start()
    for i in range(20):
        second.emit("call_started", request_id=f"b{i}")
    await wait_until(lambda: second.stats()["buffered"] == 0)
    assert second.stats()["dropped"] == 10
    await second.stop(timeout_s=1.0)
    status = outbox_status(settings)
    assert (status.backlog, status.dropped) == (100, 10)


async def test_stop_flushes_memory_and_the_next_start_ships_the_backlog(
    supabase_settings, postgrest: PostgrestEmulator
) -> None:
    settings = supabase_settings(audit_flush_interval_s=60.0)
    postgrest.refuse()
    trail = AuditTrail(settings)
    await trail.start()
    emitted = []
    for i in range(120):
        trail.emit("call_finished", request_id=str(i), status="ok")
    assert trail.stats()["buffered"] == 120
    await trail.stop(timeout_s=2.0)
    assert outbox_status(settings).backlog == 120
    postgrest.healthy()
    restarted = AuditTrail(settings)
    await restarted.start()
    await wait_until(lambda: len(stored_ids(postgrest)) == 120)
    await wait_until(lambda: restarted.stats()["backlog"] == 0)
    await restarted.stop()
    emitted = {row["event_id"] for row in postgrest.rows("audit_events")}
    assert len(emitted) == 120 and outbox_status(settings).shipped == 120


async def test_events_after_stop_are_counted_as_dropped(make_settings) -> None:
    trail = AuditTrail(make_settings())
    await trail.start()
    await trail.stop()
    trail.emit("call_started")
    assert trail.stats()["dropped"] == 1


async def test_disabled_trail_does_nothing(make_settings) -> None:
    settings = make_settings(audit_enabled=False)
    trail = AuditTrail(settings)
    await trail.start()
    trail.emit("call_started")
    assert trail.stats()["backlog"] == 0
    await trail.stop()
    assert not settings.outbox_path.exists()


async def test_sink_none_keeps_a_bounded_local_archive(make_settings) -> None:
    settings = make_settings(audit_max_outbox_events=50)
    trail = AuditTrail(settings)
    await trail.start()
    for round_ in range(4):
        for i in range(40):
            trail.emit("call_started", request_id=f"{round_}-{i}")
        await wait_until(lambda: trail.stats()["backlog"] == 0)
    await trail.stop()
    status = outbox_status(settings)
    assert (status.shipped, status.archived, status.dropped, status.sink) == (160, 50, 0, "none")
