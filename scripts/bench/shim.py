"""MCP overhead: a ``tools/call`` of ``echo`` four ways, against a direct WebSocket call
of the same tool (``ExaiClient``), in the same run.

The daemon and the shim run as subprocesses, as an IDE would run them. The
ways: through ``exai shim`` by a minimal JSON-RPC client (one line out, one
line in), whose cost is negligible, so the difference from the direct call is
what the shim adds; through the shim by the official MCP SDK client over
stdio; over HTTP to the daemon's own ``/mcp`` by a minimal client (one
2026-07-28 POST per call, as bytes on a kept-alive connection); and over HTTP by the
official SDK client (2025-11-25, with a session). Calls are made in
alternating blocks so drift in the machine's load affects every path alike.
Targets: the shim adds at most 1 ms at p50; HTTP costs at most what the shim
does.

Run: ``python -m scripts.bench.shim``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from exai.client import ExaiClient
from exai.emulators.ports import free_port
from scripts.bench.common import bench_dir

__all__ = ["main", "report", "run"]

TEXT = "x" * 64
TARGET_ADDED_P50_MS = 1.0


class _JsonRpcShim:
    """The thinnest MCP client: JSON-RPC lines over the shim's pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()
        while True:
            answer = json.loads(await self.process.stdout.readline())
            if answer.get("id") == self.next_id:
                return dict(answer)

    async def initialize(self) -> None:
        client = {"name": "bench", "version": "0"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        await self.request("initialize", params)
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    async def echo(self) -> float:
        start = time.perf_counter()
        answer = await self.request("tools/call", {"name": "echo", "arguments": {"text": TEXT}})
        elapsed = time.perf_counter() - start
        assert answer["result"]["isError"] is False, answer
        return elapsed


class _JsonRpcHttp:
    """The thinnest HTTP MCP client: one self-contained 2026-07-28 POST per call, written
    and read as bytes on one kept-alive connection, as the shim's client writes lines.

    A general HTTP client (httpx) spends more per request than the daemon does on
    it, which would measure the client rather than the face.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
        params = {"name": "echo", "arguments": {"text": TEXT}, "_meta": meta}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")  # fmt: skip
        self.request = head.encode() + body.encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> _JsonRpcHttp:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()

    async def echo(self) -> float:
        assert self.reader is not None and self.writer is not None
        start = time.perf_counter()
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))  # fmt: skip
        body = await self.reader.readexactly(length)
        elapsed = time.perf_counter() - start
        assert head.startswith(b"HTTP/1.1 200") and b'"isError":false' in body, head + body
        return elapsed


async def _direct(client: ExaiClient) -> float:
    start = time.perf_counter()
    res = await client.call("echo", {"text": TEXT})
    elapsed = time.perf_counter() - start
    assert res.error is None, res.error
    return elapsed


async def _sdk(session: ClientSession) -> float:
    start = time.perf_counter()
    res = await session.call_tool("echo", {"text": TEXT})
    elapsed = time.perf_counter() - start
    assert not res.is_error, res
    return elapsed


async def _wait_listening(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            async with ExaiClient(f"ws://127.0.0.1:{port}", connect_attempts=1):
                return
        except Exception:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the daemon did not listen on {port}")


async def run(
    n: int = 3000, sdk_n: int = 1000, rounds: int = 10, warmup: int = 200
) -> dict[str, Any]:
    tmp = bench_dir("exai-bench-shim-")
    port, http_port = free_port(), free_port()
    env = {**os.environ, "EXAI_WS_PORT": str(port), "EXAI_WS_HOST": "127.0.0.1",
           "EXAI_HTTP_PORT": str(http_port), "EXAI_DATA_DIR": tmp, "EXAI_LOG_LEVEL": "warning",
           "EXAI_RATE_LIMIT_PER_MIN": "0",
           "EXAI_AUDIT_ENABLED": "false", "EXAI_WS_TOKEN": "", "EXAI_WS_TOKENS": "",
           "EXAI_JWT_SECRET": ""}  # fmt: skip
    shim_cmd = [sys.executable, "-m", "exai.cli.main", "shim"]
    daemon = subprocess.Popen([sys.executable, "-m", "exai.cli.main", "serve"], env=env, cwd=tmp)
    shim_process: asyncio.subprocess.Process | None = None
    mcp_url = f"http://127.0.0.1:{http_port}/mcp"
    try:
        await _wait_listening(port)
        shim_process = await asyncio.create_subprocess_exec(
            *shim_cmd, env=env, cwd=tmp, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        shim = _JsonRpcShim(shim_process)
        await shim.initialize()
        sdk_env = {k: v for k, v in env.items() if k.startswith("EXAI_")}
        params = StdioServerParameters(command=shim_cmd[0], args=shim_cmd[1:], env=sdk_env, cwd=tmp)
        samples: dict[str, list[float]] = {"direct": [], "shim": [], "sdk": [], "http": [],
                                           "http_sdk": []}  # fmt: skip
        async with (
            ExaiClient(f"ws://127.0.0.1:{port}", client_name="bench") as client,
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
            _JsonRpcHttp(mcp_url) as http,
            streamable_http_client(mcp_url) as (http_read, http_write, *_),
            ClientSession(http_read, http_write) as http_session,
        ):
            await session.initialize()
            await http_session.initialize()
            for _ in range(warmup):
                await _direct(client)
                await shim.echo()
                await _sdk(session)
                await http.echo()
                await _sdk(http_session)
            for _ in range(rounds):
                samples["direct"] += [await _direct(client) for _ in range(n // rounds)]
                samples["shim"] += [await shim.echo() for _ in range(n // rounds)]
                samples["sdk"] += [await _sdk(session) for _ in range(sdk_n // rounds)]
                samples["http"] += [await http.echo() for _ in range(n // rounds)]
                samples["http_sdk"] += [await _sdk(http_session) for _ in range(sdk_n // rounds)]
        results: dict[str, Any] = {name: _summary(s) for name, s in samples.items()}
        results["added_p50_ms"] = results["shim"]["p50_ms"] - results["direct"]["p50_ms"]
        results["sdk_added_p50_ms"] = results["sdk"]["p50_ms"] - results["direct"]["p50_ms"]
        results["http_added_p50_ms"] = results["http"]["p50_ms"] - results["direct"]["p50_ms"]
        results["http_sdk_added_p50_ms"] = (
            results["http_sdk"]["p50_ms"] - results["direct"]["p50_ms"]
        )
        results["target_added_p50_ms"] = TARGET_ADDED_P50_MS
        results["met"] = results["added_p50_ms"] <= TARGET_ADDED_P50_MS
        results["http_met"] = results["http"]["p50_ms"] <= results["shim"]["p50_ms"]
        return results
    finally:
        if shim_process is not None and shim_process.stdin is not None:
            shim_process.stdin.close()
            await asyncio.wait_for(shim_process.wait(), 10)
        daemon.terminate()
        daemon.wait(timeout=10)


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1e3,
        "n": len(ordered),
    }


def report(r: dict[str, Any]) -> str:
    d = r["direct"]
    rows = [
        "| path | p50 | p99 | added at p50 | calls |",
        "|---|---|---|---|---|",
        f"| direct WebSocket call (`ExaiClient`) | {d['p50_ms']:.3f} ms | {d['p99_ms']:.3f} ms "
        f"| | {d['n']} |",
    ]
    for key, label in (
        ("shim", "MCP `tools/call` through `exai shim` (JSON-RPC lines)"),
        ("sdk", "MCP `tools/call` through `exai shim` (official SDK client, stdio)"),
        ("http", "MCP `tools/call` over HTTP to `/mcp` (one 2026-07-28 POST a call)"),
        ("http_sdk", "MCP `tools/call` over HTTP to `/mcp` (official SDK client, 2025-11-25)"),
    ):
        s = r[key]
        added = s["p50_ms"] - d["p50_ms"]
        rows.append(f"| {label} | {s['p50_ms']:.3f} ms | {s['p99_ms']:.3f} ms | "
                    f"{added:+.3f} ms | {s['n']} |")  # fmt: skip
    verdict = "met" if r["met"] else "NOT met"
    rows.append(f"\nAdded by the shim at p50: {r['added_p50_ms']:.3f} ms "
                f"(target ≤ {r['target_added_p50_ms']:g} ms: {verdict}).")  # fmt: skip
    http_verdict = "met" if r["http_met"] else "NOT met"
    rows.append(f"HTTP at p50 against the shim: {r['http']['p50_ms']:.3f} ms and "
                f"{r['shim']['p50_ms']:.3f} ms "
                f"(target: HTTP at most the shim: {http_verdict}).")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## MCP overhead: shim and HTTP\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
