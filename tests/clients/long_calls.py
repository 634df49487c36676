"""Calls of over 90 s in both real clients, started when the suite is collected.

A TEST FIXTURE. Such a call spends its time waiting for the provider, so it is
started in the background as soon as pytest knows the test will run, and the
rest of the suite runs meanwhile; the test itself only collects the answers.
It has a provider emulator, a daemon and clients of its own, since the
suite's are set up and torn down by other tests while it waits.

Under pytest-xdist every worker collects the suite, but only the first one
(``gw0``) makes the calls; it writes what the clients saw to a file named for
the test run, and the test, on whichever worker it lands, reads it from there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from exai.emulators.provider import EmulatorServer
from tests.clients.claude_code import ClaudeCode, docs_env
from tests.clients.codex import Codex
from tests.clients.daemon import daemon_env
from tests.clients.install import claude_binary, codex_binary
from tests.clients.scripted import TRANSCRIPTS, Call, Observation, Script
from tests.shim.helpers import DaemonProcess

__all__ = ["LATENCY_MS", "PROMPT", "LongCalls", "makes_the_calls"]

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
        _shared_results().unlink(missing_ok=True)
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
        if os.environ.get("PYTEST_XDIST_WORKER"):
            threading.Thread(target=self._share, name="long-calls-share", daemon=True).start()

    def _share(self) -> None:
        """Write what the clients saw for the worker that runs the test."""
        try:
            seen = {name: [asdict(o) for o in run.result()] for name, run in self.runs.items()}
            shared: dict[str, object] = {"run": _run_id(), "seen": seen}
        except Exception as exc:  # the test, elsewhere, must fail with it, not time out
            shared = {"run": _run_id(), "error": repr(exc)}
        _shared_results().write_text(json.dumps(shared))

    def results(self) -> dict[str, list[Observation]]:
        if not makes_the_calls():
            return _read_shared(timeout_s=400)
        return {name: run.result(timeout=400) for name, run in self.runs.items()}

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for part in self._parts:
            part.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


def makes_the_calls() -> bool:
    """Whether this process makes the long calls: the only one, or xdist's first worker."""
    return os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"


def _run_id() -> str:
    return os.environ.get("PYTEST_XDIST_TESTRUNUID", "")


def _shared_results() -> Path:
    return TRANSCRIPTS.parent / "long-calls.json"


def _read_shared(timeout_s: float) -> dict[str, list[Observation]]:
    """What the worker that made the calls saw, once it has written it down."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data = json.loads(_shared_results().read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            data = None
        if data is not None and data["run"] == _run_id():
            if "error" in data:
                raise AssertionError(f"the long calls failed: {data['error']}")
            return {name: [Observation(**o) for o in seen] for name, seen in data["seen"].items()}
        time.sleep(1)
    raise TimeoutError("the worker making the long calls wrote no results")
