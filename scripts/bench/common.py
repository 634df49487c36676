"""What the benchmarks share: ports, a daemon in a subprocess, and percentiles.

A benchmarked daemon runs in its own process, as it does in production, so the
client measuring it does not share its event loop or its core.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from exai.emulators.ports import free_port as free_port

__all__ = [
    "BaselineMissing",
    "daemon_process",
    "free_port",
    "prose",
    "summarize",
    "wait_for_http",
    "wait_for_port",
]


class BaselineMissing(Exception):
    """What a benchmark compares against is not on this machine (another project's
    source, say): ``make bench`` reports it as not run, with this message, and goes on."""


async def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            # A full WebSocket handshake, so the server never logs a half-open probe.
            async with connect(f"ws://127.0.0.1:{port}"):
                return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


async def wait_for_http(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def bench_dir(prefix: str = "exai-bench-") -> str:
    """A new temporary directory, removed when the benchmark's process exits (a run
    leaves no data directories behind in /tmp)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@asynccontextmanager
async def daemon_process(**env: str) -> AsyncIterator[tuple[str, int]]:
    """``exai serve`` in a subprocess with ``env`` on top of quiet, isolated defaults.

    Yields the daemon's URL and process id.
    """
    data_dir = bench_dir()
    port = free_port()
    base = {
        "EXAI_WS_PORT": str(port), "EXAI_HTTP_PORT": "0", "EXAI_DATA_DIR": data_dir,
        "EXAI_LOG_LEVEL": "warning",
        "EXAI_RATE_LIMIT_PER_MIN": "0", "EXAI_AUDIT_ENABLED": "false", "EXAI_WS_TOKEN": "",
        "EXAI_WS_TOKENS": "", "EXAI_JWT_SECRET": "", "EXAI_ALLOWED_ROOTS": data_dir,
    }  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "exai.cli.main", "serve"],
        env={**os.environ, **base, **env},
        cwd=data_dir,  # keeps the developer's .env out of the measurement
    )
    try:
        await wait_for_port(port)
        http_port = {**base, **env}["EXAI_HTTP_PORT"]
        if http_port not in ("", "0"):
            await wait_for_http(int(http_port))
        yield f"ws://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def summarize(samples_s: list[float], wall_s: float | None = None) -> dict[str, Any]:
    """p50, p95, p99 and max in milliseconds, and calls per second if ``wall_s`` is given."""
    ordered = sorted(samples_s)
    n = len(ordered)

    def pct(p: float) -> float:
        return ordered[min(n - 1, max(0, round(p * n) - 1))] * 1000

    out: dict[str, Any] = {
        "n": n,
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "max_ms": ordered[-1] * 1000,
    }
    if wall_s is not None:
        out["calls_per_s"] = n / wall_s
    return out


_WORDS = (
    "the store keeps every turn of a conversation so that the model sees the whole "
    "history again on each call while old turns drop out when the window is full "
    "def assemble messages return tokens budget thread file reader provider"
).split()


def prose(rng: random.Random, chars: int) -> str:
    """About ``chars`` characters of words from a small vocabulary, drawn by ``rng``."""
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


async def on_both_stores(
    measure: Callable[[Any, str], Awaitable[dict[str, Any]]], file_name: str
) -> dict[str, dict[str, Any]]:
    """``measure(store, backend)`` on a fresh SQLite conversation store, then on one in a
    temporary Postgres (left out, and said so, where none can start)."""
    from exai.emulators.postgres import TempPostgres
    from exai.store.postgres import PostgresStore
    from exai.store.sqlite import SqliteStore

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="exai-bench-") as tmp:
        sqlite = await SqliteStore.open(Path(tmp) / file_name)
        try:
            results["sqlite"] = await measure(sqlite, "sqlite")
        finally:
            await sqlite.aclose()
    try:
        server = TempPostgres().start()
    except RuntimeError as exc:
        print(f"(Postgres skipped: {exc})")
        return results
    try:
        postgres = await PostgresStore.open(server.url)
        try:
            results["postgres"] = await measure(postgres, "postgres")
        finally:
            await postgres.aclose()
    finally:
        server.stop()
    return results


async def timed_ms(call: Callable[[], Awaitable[Any]], runs: int) -> dict[str, float]:
    """``call()`` once to warm up, then ``runs`` times: p50 and p99 in milliseconds."""
    await call()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"p50_ms": statistics.median(samples),
            "p99_ms": samples[max(0, int(len(samples) * 0.99) - 1)]}  # fmt: skip
