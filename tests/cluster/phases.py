"""The measured runs behind docs/reliability.md's cluster figures.

Each phase starts its own daemons behind HAProxy on a fresh Postgres database
(see :mod:`tests.cluster.harness`) and returns plain figures:

* :func:`failover`: conversations while daemons are killed and restarted one at
  a time (SIGKILL, and SIGTERM for a graceful restart): turns lost and stored
  twice, model calls repeated against those in flight at each kill, sessions
  resumed on another daemon, latency;
* :func:`throughput`: the same conversations on 1, 2 or 3 daemons, no faults;
* :func:`rate_limit`: one principal hammering ``echo`` through every daemon, its
  admitted calls per window against the configured limit.

Used by tests/reliability/test_cluster.py and scripts/bench/cluster.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from exai.client import ExaiClient
from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from exai.protocol import ErrorCode
from tests.cluster.harness import (
    TOKEN,
    Cluster,
    LoadReport,
    check_turns,
    model_calls,
    run_conversations,
    running_cluster,
)

__all__ = ["failover", "rate_limit", "throughput"]


async def failover(workdir: Path, pg: TempPostgres, emulator: EmulatorServer, *, daemons: int,
                   clients: int, conversations: int, turns: int, kills: int,
                   latency_ms: float) -> dict[str, Any]:  # fmt: skip
    """Conversations through HAProxy while daemons die one at a time, every
    third one gracefully (SIGTERM), the others by SIGKILL.

    The kills are spread over the run by its progress, not by the clock: kill n
    comes once n/(kills+1) of the turns are answered, however fast the machine.
    """
    url = pg.create_database(f"failover_{uuid.uuid4().hex[:8]}")
    emulator.reset()
    emulator.configure(latency_ms=latency_ms)
    resumed = 0.0
    async with running_cluster(workdir, daemons, url, emulator) as cluster:
        progress = LoadReport()
        load = asyncio.ensure_future(run_conversations(cluster.url, clients, conversations, turns,
                                                       report=progress))  # fmt: skip
        total = conversations * turns
        for n in range(kills):
            while not load.done() and progress.turns_ok < (n + 1) * total // (kills + 1):
                await asyncio.wait({load}, timeout=0.05)
            if load.done():
                break
            index = n % daemons
            resumed += await _metric(cluster, index, "exai_cluster_resumed")
            await cluster.kill_and_restart(index, graceful=n % 3 == 2)
        report = await load
        resumed += sum(await asyncio.gather(
            *(_metric(cluster, i, "exai_cluster_resumed") for i in range(daemons))))  # fmt: skip
        done = cluster.kills
    figures = report.summary()
    figures["failures_sample"] = report.failures[:5]
    figures["turns"] = await check_turns(url, report.threads, turns)
    stored_at = figures["turns"].pop("stored_at")
    figures["model_calls"] = model_calls(emulator, done, stored_at)
    figures["sessions_resumed_on_another_daemon"] = int(resumed)
    figures["setup"] = {"daemons": daemons, "clients": clients, "conversations": conversations,
                        "turns": turns, "provider_latency_ms": latency_ms,
                        "kills": kills}  # fmt: skip
    return figures


async def _metric(cluster: Cluster, index: int, name: str) -> float:
    daemon = cluster.daemons[index]
    if not daemon.alive():
        return 0.0
    return (await daemon.ametrics()).get(name, 0.0)


async def throughput(workdir: Path, pg: TempPostgres, emulator: EmulatorServer, *,
                     daemons: int, clients: int, conversations: int, turns: int,
                     latency_ms: float) -> dict[str, Any]:  # fmt: skip
    url = pg.create_database(f"throughput_{uuid.uuid4().hex[:8]}")
    emulator.reset()
    emulator.configure(latency_ms=latency_ms)
    async with running_cluster(workdir, daemons, url, emulator) as cluster:
        report = await run_conversations(cluster.url, clients, conversations, turns)
    figures = report.summary()
    figures["daemons"] = daemons
    return figures


async def rate_limit(workdir: Path, pg: TempPostgres, emulator: EmulatorServer, *,
                     daemons: int, clients: int, per_min: float, window_s: float,
                     windows: int) -> dict[str, Any]:  # fmt: skip
    """Calls admitted per window for one principal hammering every daemon."""
    url = pg.create_database(f"rates_{uuid.uuid4().hex[:8]}")
    env = {"EXAI_RATE_LIMIT_PER_MIN": f"{per_min:g}", "EXAI_RATE_LIMIT_BURST": "100000",
           "EXAI_CLUSTER_RATE_WINDOW_S": f"{window_s:g}"}  # fmt: skip
    admitted: list[float] = []
    refused = 0
    async with running_cluster(workdir, daemons, url, emulator, **env) as cluster:
        # One client per daemon at least: HAProxy spreads connections (leastconn).
        started = time.time()
        # Start on a window boundary, so whole windows are measured.
        await asyncio.sleep(window_s - started % window_s)
        stop_at = time.time() + windows * window_s

        async def hammer() -> None:
            nonlocal refused
            async with ExaiClient(cluster.url, TOKEN) as client:
                while time.time() < stop_at:
                    result = await client.call("echo", {"text": "x"})
                    if result.error is None:
                        admitted.append(time.time())
                    elif result.error.code == ErrorCode.RATE_LIMITED:
                        refused += 1
                        await asyncio.sleep(min(result.error.retry_after_s or 0.05, 0.05))
                    else:
                        raise AssertionError(result.error)

        await asyncio.gather(*(hammer() for _ in range(clients)))
    limit = int(per_min * window_s / 60)
    per_window = Counter(int(t // window_s) for t in admitted)
    full = [per_window[w] for w in sorted(per_window)][:windows]
    return {
        "daemons": daemons,
        "configured_per_min": per_min,
        "window_s": window_s,
        "limit_per_window": limit,
        "admitted_per_window": full,
        "max_over_limit_pct": round(100 * (max(full) - limit) / limit, 1) if full else None,
        "observed_per_min": round(sum(full) / (len(full) * window_s) * 60, 1) if full else None,
        "refused": refused,
    }
