"""The client side of ``scripts.bench.mcp1_clients``: runs under the benchmark's own venv.

This file imports only the standard library and ``mcp`` 1.x (the benchmark
venv holds ``mcp<2``), never exai. It reads a JSON spec on stdin: the servers
to start over stdio (name, command, args, env, cwd, the tool and arguments to
call, and whether the client validates results against the tool's
``outputSchema`` as the 1.x ``ClientSession`` does by default), the number of
calls and rounds. It connects to every server, warms each up, then calls them
in alternating blocks, so drift in the machine's load falls on all of them
alike, and prints one JSON object: the samples' p50 and p99 per server, the
``mcp`` version, and whether each tool declared an ``outputSchema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
from importlib.metadata import version
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def _no_validation(self: Any, name: str, result: Any) -> None:
    """Stands in for ClientSession._validate_tool_result: the client with validation off."""
    return None


async def _call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> float:
    start = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    elapsed = time.perf_counter() - start
    if result.isError:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return elapsed


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    servers = spec["servers"]
    samples: dict[str, list[float]] = {s["name"]: [] for s in servers}
    declared: dict[str, bool] = {}
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for server in servers:
            params = StdioServerParameters(
                command=server["command"], args=server["args"], env=server["env"],
                cwd=server.get("cwd"),
            )  # fmt: skip
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            declared[server["name"]] = tools[server["tool"]].outputSchema is not None
            if not server.get("validate", True):
                session._validate_tool_result = _no_validation.__get__(session)  # type: ignore[method-assign]
            sessions.append((server, session))
        for server, session in sessions:
            for _ in range(spec["warmup"]):
                await _call(session, server["tool"], server["arguments"])
        block = max(1, spec["calls"] // spec["rounds"])
        for _ in range(spec["rounds"]):
            for server, session in sessions:
                for _ in range(block):
                    samples[server["name"]].append(
                        await _call(session, server["tool"], server["arguments"])
                    )
    out: dict[str, Any] = {"mcp_version": version("mcp"), "servers": {}}
    for name, values in samples.items():
        ordered = sorted(values)
        out["servers"][name] = {
            "p50_ms": statistics.median(ordered) * 1e3,
            "p99_ms": ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1e3,
            "n": len(ordered),
            "output_schema": declared[name],
        }
    return out


def main() -> None:
    spec = json.loads(sys.stdin.read())
    print(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main()
