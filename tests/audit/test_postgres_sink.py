"""The postgres sink and the shipped migration, against a real Postgres."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from exai.audit import AuditTrail, SinkRejected, SinkUnavailable
from exai.audit.events import new_event
from exai.audit.postgres_sink import PostgresSink

from .helpers import wait_until

MIGRATION = next(
    (Path(__file__).parents[2] / "supabase" / "migrations").glob("*_audit_events.sql")
).read_text()


@pytest.fixture(scope="module")
def pg() -> Iterator[object]:
    try:
        from exai.emulators.postgres import TempPostgres

        server = TempPostgres().start()
    except (ImportError, RuntimeError) as exc:
        pytest.skip(f"no local Postgres: {exc}")
    yield server
    server.stop()


async def _database(pg, name: str, *, supabase_roles: bool = False) -> str:
    if supabase_roles:
        admin = await asyncpg.connect(pg.url)
        for role in ("anon", "authenticated", "service_role"):
            exists = await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
            if not exists:
                await admin.execute(f"CREATE ROLE {role} NOLOGIN")
        await admin.close()
    url = pg.create_database(name)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(MIGRATION)
        await conn.execute(MIGRATION)  # re-applying is harmless
    finally:
        await conn.close()
    return url


async def test_migration_creates_table_indexes_rls_and_views_on_plain_postgres(pg) -> None:
    url = await _database(pg, "audit_plain")
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval(
            "SELECT relrowsecurity FROM pg_class WHERE relname = 'audit_events'"
        )
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'audit_events'")}  # fmt: skip
        assert {"audit_events_ts_idx", "audit_events_session_idx", "audit_events_request_idx",
                "audit_events_thread_idx"} <= indexes  # fmt: skip
        views = {r["viewname"] for r in await conn.fetch("SELECT viewname FROM pg_views")}
        assert {"audit_calls_per_tool_hourly", "audit_errors_by_code",
                "audit_provider_latency"} <= views  # fmt: skip
    finally:
        await conn.close()


async def test_only_the_service_role_may_insert_where_supabase_roles_exist(pg) -> None:
    url = await _database(pg, "audit_roles", supabase_roles=True)
    conn = await asyncpg.connect(url)
    row = ("00000000-0000-4000-8000-000000000001", "call_started", "2025-01-01T00:00:00Z", "i")
    insert = (
        "INSERT INTO audit_events (event_id, kind, ts, instance_id) "
        "VALUES ($1, $2, $3::text::timestamptz, $4)"
    )
    try:
        await conn.execute("SET ROLE service_role")
        await conn.execute(insert, *row)
        for role in ("anon", "authenticated"):
            await conn.execute(f"SET ROLE {role}")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(insert, "00000000-0000-4000-8000-000000000002", *row[1:])
        await conn.execute("RESET ROLE")
        policies = {r["policyname"] for r in await conn.fetch(
            "SELECT policyname FROM pg_policies WHERE tablename = 'audit_events'")}  # fmt: skip
        assert policies == {"audit_events_service_insert", "audit_events_service_select"}
    finally:
        await conn.close()


async def test_trail_ships_to_postgres_once_and_the_views_summarise(pg, make_settings) -> None:
    url = await _database(pg, "audit_sink")
    trail = AuditTrail(make_settings(audit_sink="postgres", audit_postgres_url=url,
                                     audit_batch_size=7))  # fmt: skip
    await trail.start()
    for i in range(20):
        trail.emit("call_finished", session_id="s", request_id=f"r{i}", tool="chat",
                   duration_ms=10 * i, status="error" if i % 5 == 0 else "ok",
                   error_code="TIMEOUT" if i % 5 == 0 else None)  # fmt: skip
    for latency in (100, 200, 300):
        trail.emit("provider_request", provider="kimi", model="k2", latency_ms=latency,
                   prompt_tokens=10, completion_tokens=5, retries=0, status="ok")  # fmt: skip
    trail.emit("conversation_turn", thread_id="t1", request_id="r1", role="user",
               message={"role": "user", "content": "hi"})  # fmt: skip
    await wait_until(lambda: trail.stats()["shipped"] == 24)
    await trail.stop()

    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM audit_events") == 24
        turn = await conn.fetchrow("SELECT * FROM audit_events WHERE kind = 'conversation_turn'")
        assert turn["thread_id"] == "t1" and '"content": "hi"' in turn["data"]
        calls = await conn.fetchrow("SELECT calls, errors FROM audit_calls_per_tool_hourly")
        assert (calls["calls"], calls["errors"]) == (20, 4)
        errors = await conn.fetchrow("SELECT error_code, occurrences FROM audit_errors_by_code")
        assert (errors["error_code"], errors["occurrences"]) == ("TIMEOUT", 4)
        latency = await conn.fetchrow("SELECT requests, p50_ms FROM audit_provider_latency")
        assert (latency["requests"], latency["p50_ms"]) == (3, 200.0)
    finally:
        await conn.close()


async def test_sink_is_idempotent_and_sorts_failures(pg) -> None:
    url = await _database(pg, "audit_direct")
    events = [new_event("call_started", "i", {"request_id": str(i)}) for i in range(5)]
    sink = PostgresSink(url)
    await sink.send(events)
    await sink.send(events)
    conn = await asyncpg.connect(url)
    assert await conn.fetchval("SELECT count(*) FROM audit_events") == 5
    await conn.execute("ALTER TABLE audit_events RENAME TO audit_events_old")
    await conn.close()
    with pytest.raises(SinkRejected, match="42P01"):
        await sink.send(events)
    await sink.close()
    with pytest.raises(SinkUnavailable):
        await PostgresSink(f"postgresql://postgres@127.0.0.1:{_closed_port()}/x", timeout_s=2).send(
            events
        )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
