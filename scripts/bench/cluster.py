"""Several daemons on one Postgres: what sharing costs a call, and how far it scales.

1. **Call path.** ``echo`` round trips (one client in turn, then 50 at once) on a
   daemon whose store is Postgres, so that every finished result is noted for
   the background writer and every call is checked against a leased rate limit,
   against the same daemon on SQLite, where nothing is shared and the rate limit
   is a local bucket: the baseline, measured in the same run. ``echo`` touches
   no store, so the difference is what sharing adds to a call.
2. **Resume.** A ``hello`` naming a session another daemon wrote (one query)
   against a ``hello`` for a new session.
3. **Scale.** 50 clients, 100 conversations of 5 chat turns through HAProxy on
   1, 2 and 3 daemons (provider latency 50 ms), and one principal hammering 3
   daemons under a rate limit (tests/cluster/phases.py).

Run alone with ``python -m scripts.bench.cluster``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from exai.client import ExaiClient
from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from scripts.bench.common import bench_dir, daemon_process, summarize
from tests.cluster.phases import rate_limit, throughput

__all__ = ["main", "report", "run"]


async def _echo(url: str, sequential: int, concurrent: int, per_client: int) -> dict[str, Any]:
    async with ExaiClient(url) as client:
        for _ in range(50):  # warm-up
            await client.call("echo", {"text": "x"})
        samples = []
        for _ in range(sequential):
            t = time.perf_counter()
            await client.call("echo", {"text": "x"})
            samples.append(time.perf_counter() - t)
    one = summarize(samples)
    clients = [ExaiClient(url) for _ in range(concurrent)]
    await asyncio.gather(*(c.connect() for c in clients))
    many: list[float] = []

    async def drive(c: ExaiClient) -> None:
        for _ in range(per_client):
            t = time.perf_counter()
            await c.call("echo", {"text": "x"})
            many.append(time.perf_counter() - t)

    wall = time.perf_counter()
    await asyncio.gather(*(drive(c) for c in clients))
    wall = time.perf_counter() - wall
    await asyncio.gather(*(c.close() for c in clients))
    return {"sequential": one, "concurrent": summarize(many, wall)}


async def _hellos(url: str, session_ids: list[str | None]) -> dict[str, Any]:
    samples = []
    for sid in session_ids:
        t = time.perf_counter()
        client = ExaiClient(url, session_id=sid)
        await client.connect()
        samples.append(time.perf_counter() - t)
        await client.close()
    return summarize(samples)


async def run(
    sequential: int = 2000, concurrent: int = 50, per_client: int = 100
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with TempPostgres() as pg, EmulatorServer() as emulator:
        url = pg.create_database(f"bench_{uuid.uuid4().hex[:8]}")
        limits = {"EXAI_RATE_LIMIT_PER_MIN": "100000000", "EXAI_RATE_LIMIT_BURST": "100000000",
                  "EXAI_MEMORY_ENABLED": "false"}  # fmt: skip
        async with daemon_process(**limits) as (sqlite_url, _):
            out["sqlite"] = await _echo(sqlite_url, sequential, concurrent, per_client)
            out["hello_new_sqlite"] = await _hellos(sqlite_url, [None] * 200)
        async with daemon_process(EXAI_STORE_URL=url, **limits) as (pg_url, _):
            out["postgres_shared"] = await _echo(pg_url, sequential, concurrent, per_client)
            out["hello_new"] = await _hellos(pg_url, [None] * 200)
            written = []
            for _ in range(200):
                async with ExaiClient(pg_url) as c:
                    await c.call("echo", {"text": "x"})
                    written.append(c.session_id)
            await asyncio.sleep(0.5)  # the background writer's next pass
        # Another daemon on the same database: each hello looks its session up.
        async with daemon_process(EXAI_STORE_URL=url, **limits) as (other_url, _):
            out["hello_resumed_elsewhere"] = await _hellos(other_url, list(written))
        work = Path(bench_dir("exai-bench-cluster-"))
        out["throughput"] = []
        for n in (1, 2, 3):
            row = await throughput(work / f"n{n}", pg, emulator, daemons=n, clients=50,
                                   conversations=100, turns=5, latency_ms=50)  # fmt: skip
            out["throughput"].append(row)
        out["rate_limit"] = await rate_limit(work / "rates", pg, emulator, daemons=3, clients=30,
                                             per_min=600, window_s=5, windows=3)  # fmt: skip
    return out


def report(r: dict[str, Any]) -> str:
    def ms(d: dict[str, Any]) -> str:
        return f"{d['p50_ms']:.2f} / {d['p99_ms']:.2f} ms"

    base, shared = r["sqlite"], r["postgres_shared"]
    lines = [
        "| echo round trip (p50 / p99) | SQLite, nothing shared (baseline) | Postgres, shared |",
        "|---|---|---|",
        f"| one client | {ms(base['sequential'])} | {ms(shared['sequential'])} |",
        f"| 50 clients | {ms(base['concurrent'])} | {ms(shared['concurrent'])} |",
        f"| calls/s, 50 clients | {base['concurrent']['calls_per_s']:.0f} | "
        f"{shared['concurrent']['calls_per_s']:.0f} |",
        "",
        f"hello, new session: {ms(r['hello_new'])} (SQLite {ms(r['hello_new_sqlite'])}); "
        f"hello resuming a session another daemon wrote: {ms(r['hello_resumed_elsewhere'])}",
        "",
        "| daemons | turns/s | p50 | p99 |",
        "|---|---|---|---|",
    ]
    for row in r["throughput"]:
        lat = row["latency"]
        lines.append(f"| {row['daemons']} | {row['turns_per_s']} | {lat['p50_ms']} ms | "
                     f"{lat['p99_ms']} ms |")  # fmt: skip
    rl = r["rate_limit"]
    lines += ["", f"rate limit {rl['limit_per_window']} per {rl['window_s']} s over 3 daemons: "
              f"admitted per window {rl['admitted_per_window']}"]  # fmt: skip
    return "\n".join(lines)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## Several daemons\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
