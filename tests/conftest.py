"""Shared fixtures: settings isolated from the developer's environment, a real
daemon on an ephemeral loopback port, and real protocol clients."""

from __future__ import annotations

import asyncio
import compileall
import io
import os
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import exai
from exai.app import App
from exai.audit.scrub import log_scrubber
from exai.client import ExaiClient
from exai.emulators.postgres import TempPostgres, reap_orphans
from exai.emulators.provider import EmulatorServer
from exai.logs import configure_logging
from exai.settings import Settings
from exai.tools.base import Services, Tool
from exai.tools.registry import ToolRegistry

# Logs go to a buffer that tests can read (the secret scans do), not to the terminal.
LOG_BUFFER = io.StringIO()
configure_logging("json", "info", stream=LOG_BUFFER, scrubber=log_scrubber())


def _trust_from_a_hashed_directory() -> None:
    """Every HTTP client the daemon makes (GLM's pool shards, the job runner's, each SDK's)
    builds a TLS context, and from a CA bundle file (``SSL_CERT_FILE``, or certifi's when
    unset) that parses every certificate in it: ~20 ms of CPU a client, several hundred
    seconds a run, though the tests speak plain HTTP on loopback. From the system's
    hashed directory (``SSL_CERT_DIR``) a certificate is read when a handshake asks for
    it. Set here, before the xdist workers start, so they and every process the tests
    start inherit it."""
    capath = os.environ.get("SSL_CERT_DIR") or ssl.get_default_verify_paths().capath
    if not capath or not os.path.isdir(capath):
        return
    if any(re.fullmatch(r"[0-9a-f]{8}\.\d+", name) for name in os.listdir(capath)):
        os.environ.pop("SSL_CERT_FILE", None)
        os.environ["SSL_CERT_DIR"] = capath


_trust_from_a_hashed_directory()


class _FailuresAsTheyHappen:
    """Names each failure the moment its report arrives: ``-q`` with xdist prints only
    an ``F`` then, and the names otherwise wait for the summary at the end of the run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the progress letter, on a line of its own
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            what = "FAILED" if report.when == "call" else f"ERROR (in {report.when})"
            writer = self.config.get_terminal_writer()
            if writer.width_of_current_line:
                writer.line()
            writer.line(f"{what} {report.nodeid}", red=True)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # The controller sees every worker's reports; -v already names each test.
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput") and config.option.verbose <= 0:
        config.pluginmanager.register(_FailuresAsTheyHappen(config), "failures-as-they-happen")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Once per run, in the controller rather than in each xdist worker: compile exai's
    bytecode, and stop the throwaway Postgres servers of an earlier run that was killed
    before its watchdogs could (only those whose owning process is gone).

    Every daemon, shim, CLI and writer process the tests start imports exai afresh. In
    a new checkout, or where PYTHONDONTWRITEBYTECODE is set, none of them writes the
    bytecode it compiles, so each compiles the modules again (~0.3 s of CPU for all of
    them, in several hundred processes a run). Compiling them here, before the workers
    start, costs that once; afterwards only what changed is compiled again."""
    if hasattr(session.config, "workerinput"):
        return
    compileall.compile_dir(Path(exai.__file__).parent, quiet=1)
    reaped = reap_orphans()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reaped and reporter is not None:
        reporter.write_line(f"stopped {len(reaped)} Postgres server(s) left by an earlier run")


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "ws_host": "127.0.0.1",
        "ws_port": 0,
        "http_port": 0,
        "data_dir": tmp_path / "data",
        "allowed_roots": [str(tmp_path)],
        "progress_interval_s": 60.0,
        "audit_enabled": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture(scope="session")
def provider_emulator() -> Iterator[EmulatorServer]:
    """One provider emulator for the session; tests that use it call ``reset()``."""
    server = EmulatorServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TempPostgres]:
    """A real, throwaway Postgres 15 for the session."""
    server = TempPostgres().start()
    yield server
    server.stop()


def emulated_providers(emulator: EmulatorServer) -> dict[str, Any]:
    """Settings that point Kimi and GLM at the emulator, with test keys."""
    return {
        "kimi_api_key": "sk-test-kimi",
        "kimi_base_url": emulator.base_url_kimi,
        "glm_api_key": "test-glm-key",
        "glm_base_url": emulator.base_url_glm,
        "provider_max_retries": 0,
    }


@pytest.fixture
def settings_factory(tmp_path: Path) -> Callable[..., Settings]:
    return lambda **kw: make_settings(tmp_path, **kw)


@asynccontextmanager
async def running_daemon(
    settings: Settings,
    extra_tools: list[Tool] | None = None,
    services: Services | None = None,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[App]:
    registry = ToolRegistry.from_entry_points(settings)
    for tool in extra_tools or []:
        registry.add(tool)
    daemon = App(settings, registry=registry, services=services, clock=clock)
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop(grace_s=2.0)


@pytest.fixture
async def daemon_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    stack: list[Any] = []

    async def start(extra_tools: list[Tool] | None = None, **overrides: Any) -> App:
        cm = running_daemon(make_settings(tmp_path, **overrides), extra_tools)
        daemon = await cm.__aenter__()
        stack.append(cm)
        return daemon

    yield start
    for cm in reversed(stack):
        await cm.__aexit__(None, None, None)


@pytest.fixture
async def client_factory() -> AsyncIterator[Callable[..., Any]]:
    clients: list[ExaiClient] = []

    async def connect(daemon: App | str, token: str | None = None, **kw: Any) -> ExaiClient:
        url = daemon if isinstance(daemon, str) else daemon.url
        client = ExaiClient(url, token, **kw)
        await client.connect()
        clients.append(client)
        return client

    yield connect
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


@pytest.fixture
def collector() -> Iterator[Any]:
    """An OTLP/HTTP collector stand-in on loopback for one test
    (:class:`tests.tracing.helpers.Collector`)."""
    from tests.tracing.helpers import Collector

    c = Collector()
    try:
        yield c
    finally:
        c.close()
