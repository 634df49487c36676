"""What serving WebSocket and HTTP on one port would cost: an ASGI echo against a bare one.

Moving the daemon onto an ASGI server (uvicorn, which the ``mcp`` SDK already
brings) would let WebSocket and the HTTP faces share a port. This measures the
floor of that move: a Starlette WebSocket echo under uvicorn, driven exactly
as :mod:`scripts.bench.protocol` drives the bare ``websockets`` echo, in the
same run, rounds alternating. Whatever exai does per frame comes on top of the
ASGI figure, so if the ASGI echo alone is far from the bare one, exai on ASGI
cannot keep the protocol targets (p50 ≤ 1.5x, throughput ≥ 0.6x at 50
connections) and the HTTP faces get a listener of their own.

Run: ``python -m scripts.bench.one_port``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

from scripts.bench.common import free_port, wait_for_port
from scripts.bench.protocol import ECHO_SERVER, _concurrent, _median_round, _sequential

__all__ = ["main"]

ASGI_ECHO_SERVER = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute

async def echo(ws):
    await ws.accept()
    while True:
        msg = await ws.receive()
        if msg["type"] == "websocket.disconnect":
            return
        await ws.send_text(msg["text"])

app = Starlette(routes=[WebSocketRoute("/", echo)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            ws="websockets-sansio", ws_per_message_deflate=False, lifespan="off")
"""


async def run(sequential_n: int = 5000, conns: int = 50, per_conn: int = 200,
              rounds: int = 3) -> dict[str, Any]:  # fmt: skip
    ports = {"bare": free_port(), "asgi": free_port()}
    procs = [
        subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(ports["bare"])]),
        subprocess.Popen([sys.executable, "-c", ASGI_ECHO_SERVER, str(ports["asgi"])]),
    ]
    try:
        for port in ports.values():
            await wait_for_port(port)
        runs: dict[str, dict[str, list[dict[str, float]]]] = {
            name: {"sequential": [], "concurrent": []} for name in ports
        }
        for _ in range(rounds):
            for name, port in ports.items():
                url = f"ws://127.0.0.1:{port}"
                runs[name]["sequential"].append(await _sequential(url, False, sequential_n))
                runs[name]["concurrent"].append(await _concurrent(url, False, conns, per_conn))
        return {
            name: {mode: _median_round(r) for mode, r in modes.items()}
            for name, modes in runs.items()
        }
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def report(r: dict[str, Any]) -> str:
    b, a = r["bare"], r["asgi"]
    rows = ["| measure | bare websockets echo | uvicorn + Starlette echo | ratio |",
            "|---|---|---|---|"]  # fmt: skip
    for mode, label in (("sequential", "1 conn"), ("concurrent", "50 conns")):
        for key, name, unit in (("p50_us", "p50 round trip", "µs"),
                                ("calls_per_s", "calls/s", "")):  # fmt: skip
            ratio = a[mode][key] / b[mode][key]
            rows.append(f"| {name}, {label} | {b[mode][key]:.0f} {unit} | "
                        f"{a[mode][key]:.0f} {unit} | {ratio:.2f}x |")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## One port: ASGI WebSocket echo against bare websockets\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
