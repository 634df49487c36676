"""Provider plugins are found through the ``exai.providers`` entry-point group."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exai.providers import ChatRequest, ProviderRegistry
from exai.settings import Settings

from .helpers import user

PLUGIN = '''
"""A provider installed from a separate distribution, as a third party would ship it."""
from exai.providers.base import ChatResponse, Delta, Provider


class EchoProvider(Provider):
    name = "echo"
    max_inflight = 3

    def configured(self):
        return True

    async def complete(self, request):
        return ChatResponse(text="echo: " + request.messages[-1]["content"],
                            model=request.model, provider=self.name)

    async def stream(self, request):
        response = await self.complete(request)
        yield Delta("text", text=response.text)
        yield Delta("done", response=response)

    async def list_models(self):
        return ["echo-1"]


def create(settings):
    return EchoProvider()


def broken(settings):
    raise RuntimeError("cannot start")
'''


def install(root: Path) -> None:
    """A minimal installed distribution: a module plus a dist-info with entry points."""
    (root / "exai_echo_provider.py").write_text(PLUGIN)
    info = root / "exai_echo_provider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: exai-echo-provider\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""
        [exai.providers]
        echo = exai_echo_provider:create
        zz_broken = exai_echo_provider:broken
    """)
    )


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    site.mkdir()
    install(site)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield
    sys.modules.pop("exai_echo_provider", None)


async def test_installed_plugin_is_discovered_and_used(
    installed: None, make_settings: Callable[..., Settings]
) -> None:
    registry = ProviderRegistry.from_settings(make_settings())
    try:
        assert {"kimi", "glm", "openai_compat", "echo"} <= set(registry.providers)
        await registry.refresh_models()
        info = registry.resolve("echo-1")
        assert info.provider == "echo"

        response = await registry.complete(ChatRequest(model="", messages=user("ping")), info)
        assert response.text == "echo: ping" and response.provider == "echo"
        assert registry.status()["echo"]["max_inflight"] == 3
    finally:
        await registry.aclose()


async def test_a_broken_plugin_is_reported_not_fatal(
    installed: None, make_settings: Callable[..., Settings]
) -> None:
    registry = ProviderRegistry.from_settings(make_settings())
    try:
        status = registry.status()
        assert "RuntimeError: cannot start" in status["zz_broken"]["load_error"]
        assert "echo" in registry.providers
    finally:
        await registry.aclose()


def test_builtin_providers_are_registered_through_entry_points() -> None:
    from importlib.metadata import entry_points

    names = {ep.name: ep.value for ep in entry_points(group="exai.providers")}
    assert names["kimi"] == "exai.providers.kimi:create"
    assert names["glm"] == "exai.providers.glm:create"
    assert names["openai_compat"] == "exai.providers.openai_compat:create"
