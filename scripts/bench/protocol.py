"""Protocol overhead: exai's ``echo`` tool against a bare websockets echo server.

Both servers run as subprocesses (so the client in this process does not share
their event loop or their core), and both are driven by the same client code:
send one ``call_tool`` frame, read until a frame that is not ``call_tool_ack``
arrives. The bare server answers with the frame itself, the same size; exai
answers with a ``call_tool_res`` (an ack first only for a call still running
after its first step, which ``echo`` never is). Reported: p50/p99 round trip and
calls per second for one connection calling sequentially and for 50 connections
calling concurrently, each the median of three rounds that alternate between the
two servers (so a burst of load from elsewhere on the machine lands on both
rather than on one), and the daemon's resident memory per idle connection.

Run: ``python -m scripts.bench.protocol`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from scripts.bench.common import daemon_process, free_port, wait_for_port

__all__ = ["main"]

ECHO_SERVER = """
import asyncio, sys
from websockets.asyncio.server import serve

async def echo(ws):
    async for msg in ws:
        await ws.send(msg)

async def main():
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), compression=None, max_size=2**25):
        await asyncio.Future()

asyncio.run(main())
"""

FRAME = json.dumps({"op": "call_tool", "request_id": "r", "name": "echo",
                    "arguments": {"text": "x" * 64}})  # fmt: skip


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _open(url: str, exai: bool) -> ClientConnection:
    ws = await connect(url, compression=None, max_size=2**25)
    if exai:
        await ws.send(json.dumps({"op": "hello"}))
        await ws.recv()
    return ws


async def _roundtrip(ws: ClientConnection, frame: str) -> float:
    start = time.perf_counter()
    await ws.send(frame)
    while True:
        msg = await ws.recv()
        if '"call_tool_ack"' not in msg[:40]:
            return time.perf_counter() - start


async def _sequential(url: str, exai: bool, n: int) -> dict[str, float]:
    ws = await _open(url, exai)
    for i in range(200):  # warm up
        await _roundtrip(ws, FRAME.replace('"r"', f'"w{i}"'))
    samples = []
    start = time.perf_counter()
    for i in range(n):
        samples.append(await _roundtrip(ws, FRAME.replace('"r"', f'"s{i}"')))
    wall = time.perf_counter() - start
    await ws.close()
    return _summary(samples, wall)


async def _concurrent(url: str, exai: bool, conns: int, per_conn: int) -> dict[str, float]:
    sockets = [await _open(url, exai) for _ in range(conns)]
    samples: list[float] = []

    async def worker(k: int, ws: ClientConnection) -> None:
        for i in range(per_conn):
            samples.append(await _roundtrip(ws, FRAME.replace('"r"', f'"c{k}-{i}"')))

    start = time.perf_counter()
    await asyncio.gather(*(worker(k, ws) for k, ws in enumerate(sockets)))
    wall = time.perf_counter() - start
    await asyncio.gather(*(ws.close() for ws in sockets))
    return _summary(samples, wall)


def _median_round(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the rounds."""
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def _summary(samples: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_us": statistics.median(ordered) * 1e6,
        "p99_us": ordered[int(len(ordered) * 0.99) - 1] * 1e6,
        "calls_per_s": len(samples) / wall,
        "n": len(samples),
    }


async def _idle_memory(url: str, pid: int, conns: int) -> float:
    await asyncio.sleep(0.5)
    before = _rss_kib(pid)
    sockets = [await _open(url, True) for _ in range(conns)]
    await asyncio.sleep(1.0)
    after = _rss_kib(pid)
    await asyncio.gather(*(ws.close() for ws in sockets))
    return (after - before) / conns


async def run(sequential_n: int = 5000, conns: int = 50, per_conn: int = 200,
              idle_conns: int = 1000, rounds: int = 3) -> dict[str, Any]:  # fmt: skip
    echo_port = free_port()
    echo = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(echo_port)])
    try:
        await wait_for_port(echo_port)
        echo_url = f"ws://127.0.0.1:{echo_port}"
        async with (
            daemon_process() as (exai_url, pid),
            daemon_process(EXAI_AUDIT_ENABLED="true") as (audit_url, _),
        ):
            servers = (("bare", echo_url, False), ("exai", exai_url, True),
                       ("exai_audit", audit_url, True))  # fmt: skip
            runs: dict[str, dict[str, list[dict[str, float]]]] = {
                name: {"sequential": [], "concurrent": []} for name, _, _ in servers
            }
            for _ in range(rounds):
                for name, url, is_exai in servers:
                    runs[name]["sequential"].append(await _sequential(url, is_exai, sequential_n))
                    runs[name]["concurrent"].append(
                        await _concurrent(url, is_exai, conns, per_conn)
                    )
            results: dict[str, Any] = {
                name: {mode: _median_round(r) for mode, r in modes.items()}
                for name, modes in runs.items()
            }
            results["idle_kib_per_conn"] = await _idle_memory(exai_url, pid, idle_conns)
            return results
    finally:
        echo.terminate()
        echo.wait(timeout=10)


def report(r: dict[str, Any]) -> str:
    b, e = r["bare"], r["exai"]
    rows = [
        "| measure | bare websockets echo | exai echo tool | ratio | target |",
        "|---|---|---|---|---|",
    ]
    for mode in ("sequential", "concurrent"):
        label = "1 conn" if mode == "sequential" else "50 conns"
        rows.append(f"| p50 round trip, {label} | {b[mode]['p50_us']:.0f} µs | "
                    f"{e[mode]['p50_us']:.0f} µs | {e[mode]['p50_us'] / b[mode]['p50_us']:.2f}x | "
                    f"{'≤ 1.5x' if mode == 'sequential' else ''} |")  # fmt: skip
        rows.append(
            f"| p99 round trip, {label} | {b[mode]['p99_us']:.0f} µs | "
            f"{e[mode]['p99_us']:.0f} µs | {e[mode]['p99_us'] / b[mode]['p99_us']:.2f}x | |"
        )
        rows.append(f"| calls/s, {label} | {b[mode]['calls_per_s']:.0f} | "
                    f"{e[mode]['calls_per_s']:.0f} | "
                    f"{e[mode]['calls_per_s'] / b[mode]['calls_per_s']:.2f}x | "
                    f"{'≥ 0.6x' if mode == 'concurrent' else ''} |")  # fmt: skip
    rows.append(f"| resident memory per idle connection | | {r['idle_kib_per_conn']:.1f} KiB | "
                f"| ≤ 64 KiB |")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## Protocol overhead\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
