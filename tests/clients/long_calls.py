"""Calls of over 90 s in both real clients, started when the suite is collected.

A TEST FIXTURE. Such a call spends its time waiting for the provider, so it is
started in the background as soon as pytest knows the test will run, and the
rest of the suite runs meanwhile; the test itself only collects the answers.
It has a provider emulator, a daemon and clients of its own, since the
suite's are set up and torn down by other tests while it waits.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from exai.emulators.provider import EmulatorServer
from tests.clients.claude_code import ClaudeCode, docs_env
from tests.clients.codex import Codex
from tests.clients.daemon import daemon_env
from tests.clients.install import claude_binary, codex_binary
from tests.clients.scripted import Call, Observation, Script
from tests.shim.helpers import DaemonProcess

__all__ = ["LATENCY_MS", "PROMPT", "LongCalls"]

LATENCY_MS = 91_000
PROMPT = f"Take your time. [emulate:latency_ms={LATENCY_MS}]"


def _slow_chat() -> Script:
    return Script([Call("chat", {"prompt": PROMPT}, search="chat kimi glm second opinion")])


class LongCalls:
    def __init__(self) -> None:
        self.runs: dict[str, Future[list[Observation]]] = {}
        self._parts: list[EmulatorServer | DaemonProcess | ClaudeCode | Codex] = []
        self._pool: ThreadPoolExecutor | None = None
        self._workdir: Path | None = None

    def start(self) -> None:
        workdir = self._workdir = Path(tempfile.mkdtemp(prefix="exai-long-calls-"))
        emulator = EmulatorServer().start()
        daemon = DaemonProcess(workdir, **daemon_env(emulator)).start()
        claude = ClaudeCode(claude_binary(), home=workdir / "claude-home", daemon=daemon).start()
        codex = Codex(codex_binary(), home=workdir / "codex-home", daemon=daemon).start()
        self._parts = [codex, claude, daemon, emulator]
        projects = {name: workdir / name for name in ("claude", "codex")}
        for project in projects.values():
            project.mkdir()
        pool = self._pool = ThreadPoolExecutor(2, thread_name_prefix="long-call")
        self.runs["claude-code"] = pool.submit(
            claude.run, projects["claude"], _slow_chat(), timeout_s=300,
            **docs_env("claude-code-env"),
        )  # fmt: skip
        self.runs["codex"] = pool.submit(codex.run, projects["codex"], _slow_chat(),
                                         timeout_s=300)  # fmt: skip

    def results(self) -> dict[str, list[Observation]]:
        return {name: run.result(timeout=400) for name, run in self.runs.items()}

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for part in self._parts:
            part.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
