"""Soak: a thousand connections held for a minute with calls flowing.

990 steady clients each call ``echo`` about once a second (one call in ten
sleeps 50 ms in the daemon). Ten greedy clients fire bursts of 60 concurrent
slow calls at a daemon configured with ``EXAI_MAX_INFLIGHT_PER_SESSION=8``:
eight run, the session's queue holds 32, and the rest are refused with
``OVER_CAPACITY``, the only error allowed. The steady clients must see no error
at all and no connection may drop; latency percentiles and throughput are
reported, not asserted.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from exai.client import ExaiClient
from exai.protocol import ErrorCode
from tests.reliability.harness import DaemonProcess, percentiles, scaled, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

TOKEN = "soak-token-9e77"
GREEDY = 10
BURST = 60
PER_SESSION = 8
LIMITS = {
    "EXAI_MAX_INFLIGHT_PER_SESSION": str(PER_SESSION),  # queue: 4 x 8 per session
    "EXAI_MAX_INFLIGHT": "512",
    "EXAI_QUEUE_MAX": "1024",
    "EXAI_QUEUE_TIMEOUT_S": "10",
    "EXAI_RATE_LIMIT_PER_MIN": "0",
}


class Load:
    def __init__(self, duration_s: float) -> None:
        self.duration_s = duration_s
        self.stop = asyncio.Event()
        self.latencies: dict[str, list[float]] = {"fast": [], "delayed": []}
        self.outcomes: Counter[str] = Counter()
        self.unexpected: list[str] = []

    async def steady(self, client: ExaiClient, seed: int) -> None:
        rng = random.Random(seed)
        await asyncio.sleep(rng.uniform(0, 1))  # spread the first calls
        n = 0
        while not self.stop.is_set():
            n += 1
            arguments: dict[str, object] = {"text": f"steady {seed} {n}"}
            kind = "delayed" if n % 10 == 0 else "fast"
            if kind == "delayed":
                arguments["delay_s"] = 0.05
            started = time.perf_counter()
            try:
                res = await client.call("echo", arguments, wait_s=60)
            except Exception as exc:
                self.unexpected.append(f"steady {seed}: {exc!r}")
                return
            elapsed = time.perf_counter() - started
            if res.error is not None:
                self.unexpected.append(f"steady {seed}: {res.error.code}: {res.error.message}")
            elif res.outputs[0].text != arguments["text"]:
                self.unexpected.append(f"steady {seed}: wrong answer")
            else:
                self.latencies[kind].append(elapsed)
                self.outcomes["ok"] += 1
            await asyncio.sleep(rng.uniform(0.5, 1.5))

    async def greedy(self, client: ExaiClient, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            results = await asyncio.gather(
                *(
                    client.call("echo", {"text": "g", "delay_s": 0.5}, wait_s=60)
                    for _ in range(BURST)
                ),
                return_exceptions=True,
            )
            for res in results:
                if isinstance(res, BaseException):
                    self.unexpected.append(f"greedy {seed}: {res!r}")
                elif res.error is None:
                    self.outcomes["ok"] += 1
                elif res.error.code == ErrorCode.OVER_CAPACITY:
                    self.outcomes["over_capacity"] += 1
                else:
                    self.unexpected.append(f"greedy {seed}: {res.error.code}: {res.error.message}")
            await asyncio.sleep(rng.uniform(1.0, 2.0))


async def _loop_lag(stop: asyncio.Event) -> dict[str, float]:
    """How late this (measuring) process's event loop wakes up: the part of the
    client-side latency that is the client's own doing."""
    late: list[float] = []
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.01)
        late.append(time.perf_counter() - before - 0.01)
    return percentiles(late)


async def test_a_thousand_connections_for_a_minute(tmp_path: Path, figures) -> None:
    connections = scaled(1000, minimum=50)
    duration_s = float(scaled(60, minimum=5))
    daemon = DaemonProcess(tmp_path, EXAI_WS_TOKEN=TOKEN, **LIMITS).start()
    try:
        clients = [ExaiClient(daemon.url, TOKEN, connect_attempts=5) for _ in range(connections)]
        opening = asyncio.Semaphore(100)

        async def open_one(client: ExaiClient) -> None:
            async with opening:
                await client.connect()

        await asyncio.gather(*(open_one(c) for c in clients))
        await wait_until(
            lambda: daemon.metrics()["exai_connections"] == connections, 30, "all connections open"
        )

        load = Load(duration_s)
        workers = [
            asyncio.create_task(load.greedy(c, i) if i < GREEDY else load.steady(c, i))
            for i, c in enumerate(clients)
        ]
        lag = asyncio.create_task(_loop_lag(load.stop))
        cpu_start = daemon.cpu_seconds()
        started = time.monotonic()
        rss_peak = 0
        held = []
        while time.monotonic() - started < duration_s:
            await asyncio.sleep(1.0)
            metrics = await daemon.ametrics()
            held.append(int(metrics["exai_connections"]))
            rss_peak = max(rss_peak, daemon.rss_bytes())
        daemon_cpu = (daemon.cpu_seconds() - cpu_start) / (time.monotonic() - started)
        load.stop.set()
        await asyncio.gather(*workers)
        elapsed = time.monotonic() - started
        client_lag = await lag
        disconnects = sum(c.reconnects > 0 or not c.connected for c in clients)
        await asyncio.gather(*(c.close() for c in clients))

        problems = daemon.log_problems()
        fast, delayed = percentiles(load.latencies["fast"]), percentiles(load.latencies["delayed"])
        figures.record(
            "soak",
            connections=connections,
            duration_s=round(elapsed, 1),
            limits=(
                f"{PER_SESSION} in flight per session (queue {4 * PER_SESSION}); "
                f"{GREEDY} greedy clients firing {BURST} calls at once"
            ),
            calls=sum(load.outcomes.values()) + len(load.unexpected),
            ok=load.outcomes["ok"],
            over_capacity=load.outcomes["over_capacity"],
            other_errors=len(load.unexpected),
            disconnects=disconnects,
            connections_held_min=min(held),
            throughput_per_s=round(load.outcomes["ok"] / elapsed, 1),
            **{k: v for k, v in fast.items() if k != "n"},
            fast_calls_measured=fast["n"],
            delayed_calls=f"{delayed['n']} calls sleeping 50 ms: p50 {delayed.get('p50_ms')} ms, "
            f"p99 {delayed.get('p99_ms')} ms",
            rss_peak_mib=round(rss_peak / 1024 / 1024, 1),
            daemon_cpu_share=round(daemon_cpu, 2),
            client_loop_lag=f"p99 {client_lag.get('p99_ms')} ms, max {client_lag.get('max_ms')} ms",
            error_log_lines=len(problems),
        )
        assert load.unexpected == [], load.unexpected[:5]
        assert disconnects == 0 and min(held) == connections
        assert problems == [], problems[:5]
    finally:
        daemon.stop()
