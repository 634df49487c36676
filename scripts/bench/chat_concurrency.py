"""Concurrency: 64 simultaneous ``chat`` calls against a slow provider.

The provider emulator answers every request after 500 ms. One call alone takes
about that; 64 at once through one daemon should too, if nothing serializes
them (for GLM, the SDK is synchronous and runs on a bounded thread pool, so this
checks that the pool is as wide as the GLM concurrency limit). Reported per
provider: one call's latency, the wall time of 64 concurrent calls, and the
ratio (target: at most 1.3), each the median of five rounds after a warm-up
burst that opens the daemon's provider connections. The same is measured for
Kimi through the daemon's MCP endpoint over HTTP (``/mcp``): once with
2026-07-28 POSTs on a pool of kept-alive connections (what the daemon costs),
once with the official SDK client, all calls on one 2025-11-25 session (what
that client adds too).

Run: ``python -m scripts.bench.chat_concurrency``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from exai.client import ExaiClient
from exai.emulators.provider import GLM_PREFIX, KIMI_PREFIX
from scripts.bench.common import daemon_process, free_port, wait_for_http

__all__ = ["main"]

MODELS = {"kimi": "kimi-k2.6", "glm": "glm-4.6"}


# One chat call with the given prompt, however it travels; its error, or None.
Chat = Callable[[str], Awaitable[Any]]


async def _burst(chat: Chat, concurrency: int, tag: str) -> float:
    start = time.perf_counter()
    outcomes = await asyncio.gather(*(chat(f"{tag} call {i}") for i in range(concurrency)))
    wall = time.perf_counter() - start
    errors = [e for e in outcomes if e is not None]
    if errors:
        raise RuntimeError(f"{len(errors)} calls failed, first: {errors[0]}")
    return wall


async def _measure(chat: Chat, concurrency: int, rounds: int = 5) -> dict[str, float]:
    """One call's latency and ``concurrency`` calls' wall time, each the median of
    ``rounds``. A long-running daemon has its provider connections open already; the
    first burst opens them, and is not measured."""
    await _burst(chat, concurrency, "warm-up")
    one = statistics.median([await _burst(chat, 1, "single") for _ in range(rounds)])
    wall = statistics.median([await _burst(chat, concurrency, f"round {r}") for r in range(rounds)])
    return {"one_call_s": one, "wall_s": wall, "ratio": wall / one}


async def _over_websocket(url: str, model: str, concurrency: int) -> dict[str, float]:
    async with ExaiClient(url, client_name="bench") as client:

        async def chat(prompt: str) -> Any:
            return (await client.call("chat", {"prompt": prompt, "model": model})).error

        return await _measure(chat, concurrency)


async def _over_mcp(url: str, model: str, concurrency: int) -> dict[str, float]:
    async with (
        streamable_http_client(url) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()

        async def chat(prompt: str) -> Any:
            result = await session.call_tool("chat", {"prompt": prompt, "model": model})
            return result.content if result.is_error else None

        return await _measure(chat, concurrency)


class _Post:
    """One kept-alive HTTP/1.1 connection posting MCP calls, written out by hand.

    httpx's connection pool spends time proportional to the requests waiting in it,
    which at 64 concurrent requests spreads their starts over hundreds of
    milliseconds in the measuring process; one plain connection per concurrent
    call measures the daemon instead.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def call(self, body: bytes) -> dict[str, Any]:
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        writer.write(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: chat\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        if "content-length:" in head:
            size = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
            payload = await reader.readexactly(size)
        else:  # chunked (an SSE response): read to the last chunk
            payload = b""
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                payload += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
            payload = [ln for ln in payload.splitlines() if ln.startswith(b"data:")][-1][5:]
        return dict(json.loads(payload)["result"])

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


async def _over_posts(port: int, model: str, concurrency: int) -> dict[str, float]:
    """Each concurrent call on a connection of its own, taken from a pool of them."""
    posts = [_Post(port) for _ in range(concurrency)]
    idle: asyncio.Queue[_Post] = asyncio.Queue()
    for post in posts:
        idle.put_nowait(post)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip

    async def chat(prompt: str) -> Any:
        params = {"name": "chat", "arguments": {"prompt": prompt, "model": model}, "_meta": meta}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        post = await idle.get()
        try:
            result = await post.call(body.encode())
        finally:
            idle.put_nowait(post)
        return result if result.get("isError") else None

    try:
        return await _measure(chat, concurrency)
    finally:
        for post in posts:
            post.close()


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
        "EXAI_HTTP_PORT": str(http_port := free_port()),
    }  # fmt: skip
    try:
        async with daemon_process(**env) as (url, _):
            results = {p: await _over_websocket(url, m, concurrency) for p, m in MODELS.items()}
            mcp_url = f"http://127.0.0.1:{http_port}/mcp"
            results["kimi over /mcp (POSTs)"] = await _over_posts(http_port, MODELS["kimi"],
                                                                  concurrency)  # fmt: skip
            results["kimi over /mcp (SDK client)"] = await _over_mcp(mcp_url, MODELS["kimi"],
                                                                     concurrency)  # fmt: skip
            return results
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
