"""Fixtures for the provider tests: one provider emulator for the session (reset
before each test), settings that ignore the developer's environment, registries
built from them, and each plugin pointed at the emulator through its real SDK."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.providers import ProviderRegistry
from exai.providers.glm import GLMProvider
from exai.providers.kimi import KimiProvider
from exai.providers.openai_compat import OpenAICompatibleProvider
from exai.settings import Settings

from .helpers import FAST_RETRY

_VENDOR_ENV = {"KIMI_API_KEY", "MOONSHOT_API_KEY", "KIMI_BASE_URL", "GLM_API_KEY", "ZAI_API_KEY",
               "ZHIPUAI_API_KEY", "GLM_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}  # fmt: skip


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[EmulatorServer]:
    server = EmulatorServer().start()
    yield server
    server.stop()


@pytest.fixture
def emulator(emulator_server: EmulatorServer) -> EmulatorServer:
    emulator_server.reset()
    return emulator_server


@pytest.fixture
def make_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: EmulatorServer
) -> Callable[..., Settings]:
    """Settings from keyword arguments only; provider URLs point at the emulator."""
    for name in list(os.environ):
        if name.startswith("EXAI_") or name in _VENDOR_ENV:
            monkeypatch.delenv(name)

    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "kimi_base_url": emulator.base_url_kimi,
            "glm_base_url": emulator.base_url_glm,
            "provider_max_retries": 0,
            "audit_enabled": False,
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)

    return build


@pytest.fixture
async def make_registry(
    make_settings: Callable[..., Settings],
) -> AsyncIterator[Callable[..., ProviderRegistry]]:
    """Registries from settings given as keyword arguments (see ``make_settings``);
    ``emit`` receives their audit events. Closed after the test."""
    built: list[ProviderRegistry] = []

    def build(emit: Callable[..., None] | None = None, **overrides: Any) -> ProviderRegistry:
        registry = ProviderRegistry.from_settings(make_settings(**overrides), emit=emit)
        built.append(registry)
        return registry

    yield build
    for registry in built:
        await registry.aclose()


@pytest.fixture
async def kimi(emulator: EmulatorServer) -> AsyncIterator[KimiProvider]:
    provider = KimiProvider(api_key="sk-test", base_url=emulator.base_url_kimi, retry=FAST_RETRY)
    yield provider
    await provider.aclose()


@pytest.fixture
async def glm(emulator: EmulatorServer) -> AsyncIterator[GLMProvider]:
    provider = GLMProvider(
        api_key="glm-test", base_url=emulator.base_url_glm, retry=FAST_RETRY, max_inflight=32
    )
    yield provider
    await provider.aclose()


@pytest.fixture
async def compat(emulator: EmulatorServer) -> AsyncIterator[OpenAICompatibleProvider]:
    provider = OpenAICompatibleProvider(
        base_url=emulator.base_url_openai, api_key=None, retry=FAST_RETRY
    )
    yield provider
    await provider.aclose()
