"""A throwaway daemon (and provider emulator) for ``--with-emulator`` runs.

``make baseline`` must work on a fresh machine with no API keys and no running
daemon, so this starts an in-process :class:`~exai.app.App` on an
ephemeral loopback port with a temporary data directory and a random token.
Its settings come from this module alone, never from the environment or a
``.env`` file: an operator's ``EXAI_STORE_URL`` or real provider keys must not
leak into a throwaway run. Rate limiting is off, because the run measures the
daemon, not its limiter.

When the provider emulator (:mod:`exai.emulators.provider`, a test fixture with
its own dependencies) can be imported, it is started too and Kimi and GLM point
at it with dummy keys, so model tools such as ``chat`` answer locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from exai.settings import Settings

__all__ = ["Sandbox", "sandbox_daemon", "sandbox_settings"]

_DUMMY_KEY = "sk-emulator-not-a-real-key"


class _IsolatedSettings(Settings):
    """Settings from constructor arguments only: no environment, no ``.env``."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


@dataclass
class Sandbox:
    url: str
    token: str
    emulator: bool
    notes: list[str] = field(default_factory=list)


def sandbox_settings(data_dir: Path, token: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "ws_host": "127.0.0.1",
        "ws_port": 0,
        "http_port": 0,
        "ws_token": token,
        "data_dir": data_dir,
        "allowed_roots": [str(data_dir)],
        "audit_enabled": False,
        "audit_sink": "none",
        "rate_limit_per_min": 0,
        "log_level": "warning",
    }
    values.update(overrides)
    return _IsolatedSettings(**values)


@contextlib.asynccontextmanager
async def sandbox_daemon(emulator_latency_ms: float = 0.0) -> AsyncIterator[Sandbox]:
    """Run a throwaway daemon (plus the emulator, when available) for the block."""
    from exai.app import App

    notes = [
        "the daemon runs in the collector's process: both share one event loop, so latencies "
        "include the client's work as well as the daemon's"
    ]
    async with contextlib.AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="exai-baseline-")))
        providers = await _start_emulator(stack, emulator_latency_ms, notes)
        token = secrets.token_urlsafe(24)
        daemon = App(sandbox_settings(tmp / "data", token, **providers))
        await daemon.start()
        stack.push_async_callback(daemon.stop, 5.0)
        yield Sandbox(daemon.url, token, emulator=bool(providers), notes=notes)


async def _start_emulator(
    stack: contextlib.AsyncExitStack, latency_ms: float, notes: list[str]
) -> dict[str, Any]:
    """Start the provider emulator; return the settings that point Kimi and GLM at it."""
    try:
        from exai.emulators.provider import EmulatorServer
    except ImportError as exc:
        notes.append(f"provider emulator unavailable ({exc}); model tools are not configured")
        return {}
    emulator = EmulatorServer(latency_ms=latency_ms)
    # start() and stop() block briefly while the emulator's own thread comes up or down.
    await asyncio.to_thread(emulator.start)
    stack.push_async_callback(asyncio.to_thread, emulator.stop)
    notes.append(f"providers answered by the emulator at {emulator.base_url} "
                 f"({latency_ms:g} ms latency)")  # fmt: skip
    return {
        "kimi_base_url": emulator.base_url_kimi,
        "kimi_api_key": _DUMMY_KEY,
        "glm_base_url": emulator.base_url_glm,
        "glm_api_key": _DUMMY_KEY,
    }
