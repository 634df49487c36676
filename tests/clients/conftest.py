"""Fixtures for the real-client tests: the provider emulator, a daemon in a
subprocess pointed at it, and the pinned IDE clients from npm."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.claude_code import ClaudeCode
from tests.clients.codex import Codex
from tests.clients.daemon import daemon_env
from tests.clients.install import claude_binary, codex_binary
from tests.clients.long_calls import LongCalls
from tests.clients.scripted import TRANSCRIPTS
from tests.shim.helpers import DaemonProcess

LONG_CALLS = LongCalls()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the long calls as soon as it is known that their test will run.

    The transcripts of an earlier run are removed first, so build/real-clients
    shows this run's.
    """
    shutil.rmtree(TRANSCRIPTS, ignore_errors=True)
    if any("test_long_calls.py" in item.nodeid for item in items) and not LONG_CALLS.runs:
        LONG_CALLS.start()


def pytest_sessionfinish() -> None:
    LONG_CALLS.stop()


@pytest.fixture(scope="module")
def client_daemon(
    tmp_path_factory: pytest.TempPathFactory, provider_emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    """One daemon for a module's client runs; its data outlives each run, as a user's does."""
    workdir = tmp_path_factory.mktemp("client-daemon")
    daemon = DaemonProcess(workdir, **daemon_env(provider_emulator)).start()
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module", params=["stdio", "http"])
def claude_code(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    client_daemon: DaemonProcess,
) -> Iterator[ClaudeCode]:
    """Claude Code through the shim, then through the daemon's own /mcp."""
    home = tmp_path_factory.mktemp("claude-home")
    client = ClaudeCode(claude_binary(), home=home, daemon=client_daemon,
                        transport=request.param).start()  # fmt: skip
    yield client
    client.stop()


@pytest.fixture(scope="module", params=["stdio", "http"])
def codex(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    client_daemon: DaemonProcess,
    provider_emulator: EmulatorServer,
) -> Iterator[Codex]:
    """Codex through the shim, then through the daemon's own /mcp.

    Codex declares no roots, and over HTTP no working directory stands in for
    them, so, as docs/ide.md says, its projects outside the home directory need
    EXAI_ALLOWED_ROOTS: that daemon gets the tests' temporary directory.
    """
    daemon = client_daemon
    if request.param == "http":
        workdir = tmp_path_factory.mktemp("codex-http-daemon")
        roots = f"{Path.home()},{tmp_path_factory.getbasetemp()}"
        daemon = DaemonProcess(workdir, **daemon_env(provider_emulator),
                               EXAI_ALLOWED_ROOTS=roots).start()  # fmt: skip
    home = tmp_path_factory.mktemp("codex-home")
    client = Codex(codex_binary(), home=home, daemon=daemon, transport=request.param).start()
    yield client
    client.stop()
    if daemon is not client_daemon:
        daemon.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
