"""Fixtures of the cluster tests: the session's provider emulator, reset for each test."""

from __future__ import annotations

import pytest

from exai.emulators.provider import EmulatorServer


@pytest.fixture
def emulator(provider_emulator: EmulatorServer) -> EmulatorServer:
    provider_emulator.reset()
    return provider_emulator
