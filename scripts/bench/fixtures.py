"""The provider emulator and the PostgREST fixture, each in a process of its own.

A benchmark that measures latency from its own process must not host the
servers it talks to: their request handling would share the measuring
process's interpreter lock and show up as the daemon's cost. This module runs
a test fixture in a child process, steered over the child's stdin (``healthy``,
``hang``, ``rows TABLE``, ``quit``), one JSON line answered per command.

The fixtures are separate processes, and the provider emulator apart from the
PostgREST fixture, so that each can be steered and stopped on its own.

Used by ``scripts/bench/audit_latency.py``; run alone with
``python -m scripts.bench.fixtures provider|supabase [PROVIDER_LATENCY_MS]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from exai.audit.events import COLUMNS
from exai.emulators.postgrest import PostgrestEmulator, Table
from exai.emulators.provider import EmulatorServer

__all__ = ["FixtureProcess"]


class FixtureProcess:
    """The child process, from the benchmark's side."""

    def __init__(self, role: str, provider_latency_ms: float = 0.0) -> None:
        self._role = role
        self._latency = provider_latency_ms
        self._proc: asyncio.subprocess.Process | None = None
        self.urls: dict[str, str] = {}

    async def __aenter__(self) -> FixtureProcess:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "scripts.bench.fixtures", self._role, str(self._latency),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self.urls = await self._answer()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(b"quit\n")
        await self._proc.stdin.drain()
        await asyncio.wait_for(self._proc.wait(), 30)

    async def command(self, line: str) -> Any:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(line.encode() + b"\n")
        await self._proc.stdin.drain()
        return await self._answer()

    async def _answer(self) -> Any:
        assert self._proc is not None and self._proc.stdout is not None
        line = await self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the fixture process ended")
        return json.loads(line)


def _serve(role: str, provider_latency_ms: float) -> None:
    if role == "provider":
        provider = EmulatorServer(latency_ms=provider_latency_ms).start()
        print(json.dumps({"kimi": provider.base_url_kimi}), flush=True)
        try:
            sys.stdin.readline()  # "quit", or the end of the parent
        finally:
            provider.stop()
        return
    supabase = PostgrestEmulator(
        {"audit_events": Table(columns=(*COLUMNS, "data"), key=("event_id",))}
    ).start()
    try:
        print(json.dumps({"supabase": supabase.url}), flush=True)
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            if command == "quit":
                break
            if command == "healthy":
                supabase.healthy()
                answer: Any = "ok"
            elif command == "hang":
                supabase.hang()
                answer = "ok"
            elif command == "rows":
                answer = len(supabase.rows(arg))
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        supabase.stop()


if __name__ == "__main__":
    _serve(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
