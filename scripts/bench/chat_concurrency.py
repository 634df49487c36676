"""Concurrency: 64 simultaneous ``chat`` calls against a slow provider.

The provider emulator answers every request after 500 ms. One call alone takes
about that; 64 at once through one daemon should too, if nothing serializes
them (for GLM, the SDK is synchronous and runs on a bounded thread pool, so this
checks that the pool is as wide as the GLM concurrency limit). Reported per
provider: one call's latency, the wall time of 64 concurrent calls, and the
ratio (target: at most 1.3), each the median of five rounds after a warm-up
burst that opens the daemon's provider connections.

Run: ``python -m scripts.bench.chat_concurrency``.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from typing import Any

from exai.client import ExaiClient
from exai.emulators.provider import GLM_PREFIX, KIMI_PREFIX
from scripts.bench.common import daemon_process, free_port, wait_for_http

__all__ = ["main"]

MODELS = {"kimi": "kimi-k2-0905-preview", "glm": "glm-4.6"}


async def _burst(client: ExaiClient, model: str, concurrency: int, tag: str) -> float:
    start = time.perf_counter()
    results = await asyncio.gather(*(
        client.call("chat", {"prompt": f"{tag} call {i}", "model": model})
        for i in range(concurrency)
    ))  # fmt: skip
    wall = time.perf_counter() - start
    errors = [r.error for r in results if r.error is not None]
    if errors:
        raise RuntimeError(f"{len(errors)} calls failed, first: {errors[0]}")
    return wall


async def _one_provider(
    url: str, model: str, concurrency: int, rounds: int = 5
) -> dict[str, float]:
    async with ExaiClient(url, client_name="bench") as client:
        # A long-running daemon has its provider connections open already; the
        # first burst opens them, and is not measured.
        await _burst(client, model, concurrency, "warm-up")
        one = statistics.median([await _burst(client, model, 1, "single") for _ in range(rounds)])
        wall = statistics.median(
            [await _burst(client, model, concurrency, f"round {r}") for r in range(rounds)]
        )
    return {"one_call_s": one, "wall_s": wall, "ratio": wall / one}


async def run(latency_ms: float = 500.0, concurrency: int = 64) -> dict[str, Any]:
    # The emulator gets a process of its own too: in this one it would share the
    # interpreter lock with the client that is measuring.
    port = free_port()
    emulator = subprocess.Popen([sys.executable, "-m", "exai.emulators.provider", "--port",
                                 str(port), "--latency-ms", str(latency_ms)],
                                stdout=subprocess.DEVNULL)  # fmt: skip
    await wait_for_http(port)
    base = f"http://127.0.0.1:{port}"
    env = {
        "KIMI_API_KEY": "sk-bench", "KIMI_BASE_URL": base + KIMI_PREFIX,
        "GLM_API_KEY": "bench-key", "GLM_BASE_URL": base + GLM_PREFIX,
        "EXAI_KIMI_MAX_INFLIGHT": str(concurrency), "EXAI_GLM_MAX_INFLIGHT": str(concurrency),
        "EXAI_MAX_INFLIGHT_PER_SESSION": str(concurrency * 2),
    }  # fmt: skip
    try:
        async with daemon_process(**env) as (url, _):
            return {p: await _one_provider(url, m, concurrency) for p, m in MODELS.items()}
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)


def report(results: dict[str, Any], concurrency: int = 64) -> str:
    rows = [f"| provider | one call | {concurrency} concurrent calls, wall | ratio | target |",
            "|---|---|---|---|---|"]  # fmt: skip
    for provider, r in results.items():
        rows.append(f"| {provider} | {r['one_call_s'] * 1000:.0f} ms | {r['wall_s'] * 1000:.0f} ms"
                    f" | {r['ratio']:.2f}x | ≤ 1.3x |")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## Concurrent chat calls against a 500 ms provider\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
