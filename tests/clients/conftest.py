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
from tests.clients.long_calls import LongCalls, makes_the_calls
from tests.clients.scripted import TRANSCRIPTS
from tests.shim.helpers import DaemonProcess

LONG_CALLS = LongCalls()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the long calls as soon as it is known that their test will run, and run
    their test last.

    The transcripts of an earlier run are removed first, so build/real-clients
    shows this run's. Under xdist, every worker orders the items the same way
    (it must), and only the first one makes the calls and clears the transcripts.
    """
    owner = makes_the_calls()
    if owner:
        shutil.rmtree(TRANSCRIPTS, ignore_errors=True)
    long = [item for item in items if "test_long_calls.py" in item.nodeid]
    if long and not config.option.collectonly:
        if owner and not LONG_CALLS.runs:
            LONG_CALLS.start()
        # Collected last, so the rest of the suite runs while the calls wait.
        items[:] = [item for item in items if item not in long] + long


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


CLIENTS = ["claude-code/stdio", "claude-code/http", "codex/stdio", "codex/http"]


@pytest.fixture(scope="module", params=CLIENTS)
def ide(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    client_daemon: DaemonProcess,
    provider_emulator: EmulatorServer,
) -> Iterator[ClaudeCode | Codex]:
    """Each real client, through the shim and through the daemon's own /mcp.

    Codex declares no roots, and over HTTP no working directory stands in for
    them, so, as docs/ide.md says, its projects outside the home directory need
    EXAI_ALLOWED_ROOTS: that daemon gets the tests' temporary directory.
    """
    name, transport = request.param.split("/")
    daemon = client_daemon
    if request.param == "codex/http":
        workdir = tmp_path_factory.mktemp("codex-http-daemon")
        roots = f"{Path.home()},{tmp_path_factory.getbasetemp()}"
        daemon = DaemonProcess(workdir, **daemon_env(provider_emulator),
                               EXAI_ALLOWED_ROOTS=roots).start()  # fmt: skip
    home = tmp_path_factory.mktemp(f"{name}-home")
    client: ClaudeCode | Codex
    if name == "claude-code":
        client = ClaudeCode(claude_binary(), home=home, daemon=daemon, transport=transport)
    else:
        client = Codex(codex_binary(), home=home, daemon=daemon, transport=transport)
    yield client.start()
    client.stop()
    if daemon is not client_daemon:
        daemon.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
