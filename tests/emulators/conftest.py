"""The provider emulator as a contract (:mod:`exai.emulators.contract`), driven
through the vendors' real SDK clients (``openai`` for Moonshot, ``zai-sdk`` for
Z.ai) and raw HTTP: a request breaking a rule gets the vendor's error, a correct
one its answer."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from zai import ZaiClient

from exai.emulators.provider import EmulatorServer


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[EmulatorServer]:
    with EmulatorServer() as server:
        yield server


@pytest.fixture
def emulator(emulator_server: EmulatorServer) -> EmulatorServer:
    emulator_server.reset()
    return emulator_server


@pytest.fixture
def kimi(emulator: EmulatorServer) -> Iterator[openai.OpenAI]:
    """Moonshot's documented client: the OpenAI SDK pointed at the Kimi path."""
    with openai.OpenAI(api_key="sk-test", base_url=emulator.base_url_kimi, max_retries=0) as c:
        yield c


@pytest.fixture
def zai(emulator: EmulatorServer) -> ZaiClient:
    """Z.ai's own SDK pointed at the GLM path."""
    return ZaiClient(api_key="glm-test", base_url=emulator.base_url_glm, max_retries=0)
