"""Real processes for the shim tests: a daemon (``exai serve``) and shims (``exai shim``).

The daemon runs as a subprocess so that a test can kill it mid-call and start
another on the same port, exactly as an operator's restart would look to the
shim. Its ``/metrics`` show what it executed, which is how the tests observe
cancellation and "ran once" from the daemon's side.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from prometheus_client.parser import text_string_to_metric_families

from exai.emulators.ports import free_port as free_port
from tests.reliability.harness import listening

__all__ = ["DaemonProcess", "free_port", "mcp_session", "shim_command", "shim_env"]


class DaemonProcess:
    """``exai serve`` in a subprocess on a fixed port, restartable on that port."""

    def __init__(
        self, workdir: Path, port: int | None = None, command: list[str] | None = None, **env: str
    ) -> None:
        self.workdir = workdir
        # How to run `exai serve`: this interpreter's exai by default, or an installed one.
        self.command = command or [sys.executable, "-m", "exai.cli.main", "serve"]
        self.port = port or free_port()
        self.http_port = free_port()
        self.env = {
            "EXAI_WS_HOST": "127.0.0.1",
            "EXAI_WS_PORT": str(self.port),
            "EXAI_HTTP_PORT": str(self.http_port),
            "EXAI_DATA_DIR": str(workdir / "data"),
            "EXAI_AUDIT_ENABLED": "false",
            "EXAI_LOG_LEVEL": "warning",
            "EXAI_PROGRESS_INTERVAL_S": "60",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/mcp"

    def start(self, timeout_s: float = 20.0, **env: str) -> DaemonProcess:
        self.env.update(env)
        log = open(self.workdir / f"daemon-{self.starts}.log", "wb")
        self.process = subprocess.Popen(
            self.command,
            env={**os.environ, **self.env},
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        http = self.env.get("EXAI_HTTP_PORT", "")
        ports = [self.port, *([int(http)] if http not in ("", "0") else [])]
        while not all(listening(port, timeout_s=0.2) for port in ports):
            if self.process.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError("daemon did not listen")
            time.sleep(0.05)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/metrics")
        if self.env.get("EXAI_WS_TOKEN"):  # /metrics needs the token when there is one
            request.add_header("Authorization", f"Bearer {self.env['EXAI_WS_TOKEN']}")
        with urllib.request.urlopen(request, timeout=5) as r:
            text = r.read().decode()
        out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def calls(self, tool: str, status: str) -> float:
        key = ("exai_calls_total", (("status", status), ("tool", tool)))
        return self.metrics().get(key, 0.0)

    def gauge(self, name: str) -> float:
        return self.metrics().get((name, ()), 0.0)

    async def wait_for(self, predicate: Any, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not await asyncio.to_thread(predicate, self):
            if time.monotonic() > deadline:
                raise TimeoutError("condition not reached")
            await asyncio.sleep(0.05)


def shim_command() -> list[str]:
    return [sys.executable, "-m", "exai.cli.main", "shim"]


def shim_env(daemon: DaemonProcess | None, **env: str) -> dict[str, str]:
    base = dict(daemon.env) if daemon is not None else {}
    base.setdefault("EXAI_LOG_LEVEL", "warning")
    base.update(env)
    return base


@contextlib.asynccontextmanager
async def mcp_session(
    env: dict[str, str],
    cwd: Path,
    args: list[str] | None = None,
    command: list[str] | None = None,
    **session_kw: Any,
) -> AsyncIterator[ClientSession]:
    """The official MCP client, launching ``exai shim`` (or ``command``) over stdio."""
    program, *base_args = command or shim_command()
    params = StdioServerParameters(command=program, args=[*base_args, *(args or [])],
                                   env=env, cwd=cwd)  # fmt: skip
    errlog = open(cwd / "shim.log", "a")
    try:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, **session_kw) as session:
                await session.initialize()
                yield session
    finally:
        errlog.close()
