"""Fixtures for the bridge tests: the fixture MCP server, and a daemon with a bridge."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from exai.app import App
from exai.bridge import Bridge
from exai.emulators.ports import free_port as free_port
from tests.conftest import make_settings, running_daemon
from tests.reliability.harness import listening

FIXTURE = Path(__file__).with_name("fixture_server.py")


def stdio_server_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURE), "stdio"], **extra}


class HttpFixture:
    """The fixture server over streamable HTTP, in a subprocess that can be killed and restarted."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        log = open(self.workdir / "http-fixture.log", "ab")
        self.process = subprocess.Popen([sys.executable, str(FIXTURE), "http", str(self.port)],
                                        stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        log.close()
        deadline = time.monotonic() + 20
        while True:
            if listening(self.port):
                return
            assert self.process.poll() is None, "the HTTP fixture server exited"
            assert time.monotonic() < deadline, "the HTTP fixture server did not listen"
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def http_fixture(tmp_path: Path) -> Iterator[HttpFixture]:
    server = HttpFixture(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def bridged(tmp_path: Path) -> Callable[..., Any]:
    """``async with bridged({"name": entry}) as (daemon, bridge)``: a daemon serving them."""

    @asynccontextmanager
    async def start(servers: dict[str, Any], wait: bool = True,
                    **overrides: Any) -> AsyncIterator[tuple[App, Bridge]]:  # fmt: skip
        config = tmp_path / "mcp_servers.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        values = {"mcp_servers_file": config, "bridge_retry_max_s": 0.5,
                  "bridge_health_interval_s": 0.3, **overrides}  # fmt: skip
        settings = make_settings(tmp_path, **values)
        async with running_daemon(settings) as daemon:
            bridge = daemon.core.bridge  # the daemon starts it because mcp_servers_file is set
            assert bridge is not None
            if wait:
                await bridge.wait_until_up(30)
            yield daemon, bridge

    return start
