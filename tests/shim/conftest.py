"""Fixtures for the shim tests: daemons in subprocesses, stopped at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.shim.helpers import DaemonProcess


@pytest.fixture
def daemon_process(tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    """Start ``exai serve`` subprocesses; each is stopped when the test ends."""
    started: list[DaemonProcess] = []

    def start(**env: str) -> DaemonProcess:
        daemon = DaemonProcess(tmp_path, **env).start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One daemon for the tests that only call tools (counters are read as deltas)."""
    daemon = DaemonProcess(tmp_path_factory.mktemp("daemon"),
                           EXAI_PROGRESS_INTERVAL_S="0.2").start()  # fmt: skip
    yield daemon
    daemon.stop()
