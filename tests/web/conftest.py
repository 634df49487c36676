"""Fixtures for the HTTP faces' tests: the session's provider emulator, reset for each test,
and one daemon a module's checks of single stateless requests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.live import LiveDaemon
from tests.web.faces import faces_settings


@pytest.fixture
def emulator(provider_emulator):
    provider_emulator.reset()
    return provider_emulator


@pytest.fixture(scope="module")
def one_daemon(provider_emulator, tmp_path_factory) -> Iterator[LiveDaemon]:
    """One daemon for a module, on a loop of its own, for the checks that each make one
    request whose answer depends on nothing stored before it; starting and stopping a
    daemon for each took most of its time."""
    live = LiveDaemon(faces_settings(tmp_path_factory.mktemp("faces"), provider_emulator))
    yield live.start()
    live.stop()
