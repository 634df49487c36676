"""What an operator's key costs on the hot path: ``echo`` with a revocable key against
an environment token, on one daemon, in the same run.

One ``exai serve`` subprocess holds an environment token (``EXAI_WS_TOKENS``) and,
in its SQLite store, a key made beforehand (``exai keys`` does the same). Two
connections, one per credential, call ``echo`` in turns of 250 calls, rotated, so a
burst of load elsewhere on the machine lands on both; each round is 2,000 calls per
credential and the median of five rounds' p50 and p99 is reported. A key is checked
at ``hello`` (a dict look-up and one SHA-256, :mod:`exai.keys`) and before every call
(is it still unrevoked: a dict look-up), so the second table times ``hello`` itself:
a fresh connection and its ``hello_ack``, 300 per credential, alternating.

Target: the key's p50 echo round trip at most 5% above the environment token's.

Run: ``python -m scripts.bench.keys`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from scripts.bench.common import bench_dir, daemon_process

__all__ = ["main"]

ENV_TOKEN = "tok-bench-env-0123456789abcdef"
FRAME = json.dumps({"op": "call_tool", "request_id": "r", "name": "echo",
                    "arguments": {"text": "x" * 64}})  # fmt: skip
ROUNDS, PER_ROUND, SLICE, HELLOS = 5, 2000, 250, 300


async def _make_key(path: Path) -> str:
    from exai.daemon.keys import StoreKeyAdmin
    from exai.store.base import StoreLimits
    from exai.store.sqlite import SqliteStore

    store = await SqliteStore.open(path, StoreLimits())
    try:
        _, token = await StoreKeyAdmin(store).create_key(
            {"principal": "bench", "scopes": "echo", "rate": "1000000/min"}, by="bench"
        )
    finally:
        await store.aclose()
    return token


async def _hello(url: str, token: str) -> ClientConnection:
    ws = await connect(url, compression=None, max_size=2**25)
    await ws.send(json.dumps({"op": "hello", "token": token}))
    ack = json.loads(await ws.recv())
    if not ack.get("ok"):
        raise RuntimeError(f"hello refused: {ack}")
    return ws


async def _calls(ws: ClientConnection, n: int, into: list[float]) -> None:
    for _ in range(n):
        started = time.perf_counter()
        await ws.send(FRAME)
        while True:
            frame = json.loads(await ws.recv())
            if frame["op"] != "call_tool_ack":
                break
        into.append(time.perf_counter() - started)
        if frame.get("error"):
            raise RuntimeError(f"echo failed: {frame['error']}")


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1e6


async def run(rounds: int = ROUNDS, per_round: int = PER_ROUND, hellos: int = HELLOS) -> dict:
    tmp = Path(bench_dir("exai-bench-keys-"))
    store = tmp / "store.sqlite3"
    key = await _make_key(store)
    credentials = {"environment token": ENV_TOKEN, "key": key}
    env = {"EXAI_WS_TOKENS": f"bench={ENV_TOKEN}", "EXAI_STORE_URL": f"sqlite:///{store}"}
    p50s: dict[str, list[float]] = {name: [] for name in credentials}
    p99s: dict[str, list[float]] = {name: [] for name in credentials}
    hello_us: dict[str, list[float]] = {name: [] for name in credentials}
    async with daemon_process(**env) as (url, _pid):
        conns = {name: await _hello(url, token) for name, token in credentials.items()}
        for ws in conns.values():  # warm-up
            await _calls(ws, 200, [])
        order = list(credentials)
        for r in range(rounds):
            samples: dict[str, list[float]] = {name: [] for name in credentials}
            for s in range(per_round // SLICE):
                for name in order[(r + s) % 2 :] + order[: (r + s) % 2]:
                    await _calls(conns[name], SLICE, samples[name])
            for name in credentials:
                p50s[name].append(_pct(samples[name], 50))
                p99s[name].append(_pct(samples[name], 99))
        for ws in conns.values():
            await ws.close()
        for i in range(hellos):
            for name in order[i % 2 :] + order[: i % 2]:
                started = time.perf_counter()
                ws = await _hello(url, credentials[name])
                hello_us[name].append((time.perf_counter() - started) * 1e6)
                await ws.close()
    out: dict[str, Any] = {}
    for name in credentials:
        out[name] = {"p50_us": statistics.median(p50s[name]),
                     "p99_us": statistics.median(p99s[name]),
                     "hello_p50_us": statistics.median(hello_us[name])}  # fmt: skip
    base = out["environment token"]["p50_us"]
    out["added_pct"] = round((out["key"]["p50_us"] / base - 1) * 100, 1)
    out["target_met"] = out["added_pct"] <= 5.0
    return out


def report(result: dict) -> None:
    print("## Keys: echo round trip with a revocable key against an environment token\n")
    print(f"One daemon, one connection per credential, {ROUNDS} rounds of {PER_ROUND} calls each,"
          f" in rotated turns of {SLICE}; medians of the rounds.\n")  # fmt: skip
    print("| credential | echo p50 (µs) | echo p99 (µs) | hello p50 (µs) |")
    print("|---|---:|---:|---:|")
    for name in ("environment token", "key"):
        r = result[name]
        print(f"| {name} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['hello_p50_us']:.0f} |")
    verdict = "met" if result["target_met"] else "NOT met"
    print(f"\nThe key adds {result['added_pct']}% to the p50 echo round trip "
          f"(target ≤ 5%: {verdict}).")  # fmt: skip


def main() -> dict:
    result = asyncio.run(run())
    report(result)
    return result


if __name__ == "__main__":
    main()
