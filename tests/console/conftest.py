"""Fixtures of the console's tests: a live daemon with two principals, the ntfy
stand-in, and one headless Chromium for the whole module (Debian's, driven by
Playwright; `make browser` installs it)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import emulated_providers, make_settings
from tests.console.live import LiveDaemon, NtfyStandIn

ALICE, BOB = "tok-alice-0123456789", "tok-bob-0123456789"
CHROMIUM = Path("/usr/bin/chromium")
# The machine's Chromium must be started like this (and with a new, empty profile,
# which Playwright makes for each launch), else its connections hang on this network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(__file__).resolve().parents[2] / "build" / "console"


def console_settings(tmp: Path, emulator: Any, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "ws_tokens": f"alice={ALICE},bob={BOB}",
        "admin_principals": ["alice"],
        "tool_profile": "full",
        "jobs_tick_s": 0.2,
        "jobs_min_interval_s": 0.01,
        "jobs_notify_hosts": ["127.0.0.1"],
        "budgets": "alice=5 USD/day",
        "audit_enabled": True,
        "stream_min_chunk_chars": 1,
        "stream_max_chunk_chars": 16,
        **emulated_providers(emulator),
        **overrides,
    }
    return make_settings(tmp, **values)


@pytest.fixture(scope="module")
def ntfy() -> Iterator[NtfyStandIn]:
    server = NtfyStandIn().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def live(provider_emulator: Any) -> Iterator[LiveDaemon]:
    with tempfile.TemporaryDirectory(prefix="exai-console-") as tmp:
        daemon = LiveDaemon(console_settings(Path(tmp), provider_emulator)).start()
        yield daemon
        daemon.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("the console's browser tests need Debian's chromium: run `make browser`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def emulator(provider_emulator: Any) -> Any:
    provider_emulator.reset()
    yield provider_emulator
    provider_emulator.reset()
