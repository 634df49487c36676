"""Fixtures of the keys' tests: the session's provider emulator, reset for each test."""

from __future__ import annotations

import pytest


@pytest.fixture
def emulator(provider_emulator):
    provider_emulator.reset()
    return provider_emulator
