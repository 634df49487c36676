"""Audit trail benchmark: emit cost, outbox ingest rate, and shipping rate.

``.venv/bin/python -m scripts.bench.audit_outbox [--events N] [--ship-events N]``

- **emit**: the cost of ``AuditTrail.emit`` on the call path (p50 / p99 in
  microseconds) with the trail off, with the Supabase sink healthy, and with
  it hanging on every request. The design says these are the same: ``emit``
  only appends to memory.
- **ingest**: events per second from ``emit`` to committed rows in the outbox
  file (``synchronous=FULL``), with the sink hanging so nothing is shipped away
  meanwhile. Target: at least 5,000/s.
- **shipping**: events per second from a pre-filled outbox into the PostgREST
  test fixture through the real supabase client, per batch size. The fixture
  is a Python server, so this is a lower bound for a real Supabase.

Prints a markdown table and returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exai.audit import AuditOutbox, AuditTrail
from exai.audit.events import COLUMNS, new_event
from exai.emulators.postgrest import PostgrestEmulator, Table
from exai.logs import configure_logging
from exai.settings import Settings

__all__ = ["main"]

_KEY = "bench-service-role-key-0123456789"
_TABLE = Table(columns=(*COLUMNS, "data"), key=("event_id",))


def _settings(data_dir: Path, emulator: PostgrestEmulator | None, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "audit_flush_interval_s": 0.05,
        "audit_ship_interval_s": 0.05,
        "audit_max_outbox_events": 10_000_000,
        "audit_sink": "none",
    }
    if emulator is not None:
        values.update(
            audit_sink="supabase", supabase_url=emulator.url, supabase_service_role_key=_KEY
        )
    values.update(extra)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def _fields(i: int) -> dict[str, Any]:
    return {
        "session_id": "bench-session",
        "request_id": f"req-{i}",
        "tool": "chat",
        "principal": "bench",
        "duration_ms": 12.5,
        "status": "ok",
        "error_code": None,
    }


async def _until(predicate: Callable[[], bool], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        await asyncio.sleep(0.005)


def _percentile(samples: list[int], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0


async def _emit_cost(mode: str, events: int, emulator: PostgrestEmulator,
                     stop_timeout_s: float) -> dict[str, float]:  # fmt: skip
    """Time each emit call while the writer and shipper run in the background."""
    with tempfile.TemporaryDirectory() as tmp:
        emulator.healthy()
        if mode == "hanging":
            emulator.hang()
        settings = _settings(Path(tmp), emulator, audit_enabled=mode != "off")
        trail = AuditTrail(settings, send_timeout_s=600.0)
        await trail.start()
        samples: list[int] = []
        clock = time.perf_counter_ns
        for start in range(0, events, 500):
            for i in range(start, min(start + 500, events)):
                before = clock()
                trail.emit("call_finished", **_fields(i))
                samples.append(clock() - before)
            await asyncio.sleep(0)
        await trail.stop(timeout_s=stop_timeout_s)
        emulator.healthy()
    return {"p50_us": _percentile(samples, 0.50), "p99_us": _percentile(samples, 0.99),
            "mean_us": statistics.fmean(samples) / 1000.0}  # fmt: skip


async def _ingest_rate(events: int, emulator: PostgrestEmulator,
                       stop_timeout_s: float) -> dict[str, float]:  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        emulator.hang()
        trail = AuditTrail(_settings(Path(tmp), emulator), send_timeout_s=600.0)
        await trail.start()
        started = time.perf_counter()
        for start in range(0, events, 1000):
            for i in range(start, min(start + 1000, events)):
                trail.emit("call_finished", **_fields(i))
            await asyncio.sleep(0)
        emitted = time.perf_counter()
        await _until(lambda: trail.stats()["buffered"] == 0)
        durable = time.perf_counter()
        backlog = trail.stats()["backlog"]
        await trail.stop(timeout_s=stop_timeout_s)
        emulator.healthy()
    assert backlog == events, f"expected {events} events in the outbox, found {backlog}"
    return {
        "emit_rate": events / (emitted - started),
        "ingest_rate": events / (durable - started),
        "seconds": durable - started,
    }


async def _shipping_rate(events: int, batch_size: int, emulator: PostgrestEmulator) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        emulator.reset()
        settings = _settings(Path(tmp), emulator, audit_batch_size=batch_size)
        outbox = AuditOutbox(settings.outbox_path, max_events=settings.audit_max_outbox_events)
        outbox.open()
        ours: set[str] = set()
        for start in range(0, events, 5000):
            count = min(5000, events - start)
            made = [new_event("call_finished", "bench", _fields(start + i)) for i in range(count)]
            ours.update(event["event_id"] for event in made)
            outbox.append(made)
        outbox.close()
        trail = AuditTrail(settings)
        started = time.perf_counter()
        await trail.start()
        await _until(lambda: trail.stats()["backlog"] == 0)
        seconds = time.perf_counter() - started
        await trail.stop()
    # Only this run's events count: a request the earlier hanging phase left in the
    # fixture is answered when the fixture is released, and may land after reset().
    stored = sum(1 for row in emulator.rows("audit_events") if row.get("event_id") in ours)
    assert stored == events, f"expected {events} rows in the fixture, found {stored}"
    return {"batch_size": batch_size, "rate": events / seconds, "seconds": seconds,
            "requests": len(emulator.writes())}  # fmt: skip


async def _run(events: int, ship_events: int, batch_sizes: list[int],
               stop_timeout_s: float = 5.0) -> dict[str, Any]:  # fmt: skip
    """``stop_timeout_s``: how long a trail whose sink hangs is given to stop (it
    waits that long for the sink before it gives up and keeps the backlog)."""
    emulator = PostgrestEmulator({"audit_events": _TABLE}, api_key=_KEY).start()
    try:
        emit = {mode: await _emit_cost(mode, events // 5, emulator, stop_timeout_s)
                for mode in ("off", "healthy", "hanging")}  # fmt: skip
        ingest = await _ingest_rate(events, emulator, stop_timeout_s)
        shipping = [await _shipping_rate(ship_events, size, emulator) for size in batch_sizes]
    finally:
        emulator.stop()
    return {"events": events, "emit": emit, "ingest": ingest, "shipping": shipping}


def _table(results: dict[str, Any]) -> str:
    rows = ["| measure | value |", "|---|---|"]
    for mode, figures in results["emit"].items():
        rows.append(
            f"| emit() cost, audit {mode} | p50 {figures['p50_us']:.1f} µs, "
            f"p99 {figures['p99_us']:.1f} µs |"
        )
    ingest = results["ingest"]
    rows.append(f"| emit rate (memory) | {ingest['emit_rate']:,.0f} events/s |")
    rows.append(
        f"| ingest rate emit -> outbox ({results['events']:,} events) | "
        f"{ingest['ingest_rate']:,.0f} events/s |"
    )
    for ship in results["shipping"]:
        rows.append(
            f"| shipping to PostgREST fixture, batch {ship['batch_size']} | "
            f"{ship['rate']:,.0f} events/s ({ship['requests']} requests) |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=50_000, help="events for ingest")
    parser.add_argument("--ship-events", type=int, default=20_000, help="events for shipping")
    parser.add_argument("--batch-sizes", default="100,500", help="comma list")
    args = parser.parse_args(argv)
    configure_logging(level="error")
    sizes = [int(size) for size in args.batch_sizes.split(",") if size]
    results = asyncio.run(_run(args.events, args.ship_events, sizes))
    print(_table(results))
    return results


if __name__ == "__main__":
    main()
