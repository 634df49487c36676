"""Fixtures for the real-client tests: the provider emulator, a daemon in a
subprocess pointed at it, and the pinned IDE clients from npm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.claude_code import ClaudeCode
from tests.clients.codex import Codex
from tests.clients.install import claude_binary, codex_binary
from tests.clients.long_calls import LongCalls, daemon_env
from tests.shim.helpers import DaemonProcess

LONG_CALLS = LongCalls()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the long calls as soon as it is known that their test will run."""
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


@pytest.fixture(scope="module")
def claude_code(
    tmp_path_factory: pytest.TempPathFactory, client_daemon: DaemonProcess
) -> Iterator[ClaudeCode]:
    home = tmp_path_factory.mktemp("claude-home")
    client = ClaudeCode(claude_binary(), home=home, daemon=client_daemon).start()
    yield client
    client.stop()


@pytest.fixture(scope="module")
def codex(
    tmp_path_factory: pytest.TempPathFactory, client_daemon: DaemonProcess
) -> Iterator[Codex]:
    home = tmp_path_factory.mktemp("codex-home")
    client = Codex(codex_binary(), home=home, daemon=client_daemon).start()
    yield client
    client.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
