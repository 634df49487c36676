"""The Host check of a loopback daemon's HTTP faces: exactly one host[:port], read
exactly, over raw sockets so every byte of the header is the test's own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exai.web.guard import parse_host
from tests.conftest import make_settings, running_daemon

TOKEN = "host-test-token-0123456789"


async def _get(port: int, host_lines: list[str]) -> int:
    """Send one GET /v1/models with these Host header lines; the status answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = ["GET /v1/models HTTP/1.1", *host_lines, f"Authorization: Bearer {TOKEN}",
            "Connection: close", "", ""]  # fmt: skip
    writer.write("\r\n".join(head).encode("latin-1"))
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    return int(status_line.split()[1])


REFUSED = [
    "127.0.0.1:{port}, evil.example", "evil.example, 127.0.0.1:{port}", "127.0.0.1:{port},",
    "127.0.0.1@evil.example", "evil.example#@127.0.0.1", "127.0.0.1:{port}:1",
    "127.0.0.1:99999", "127.0.0.1:{port}/x", "127.0.0.1 evil.example", "[::1]evil",
    "[::1", "localhost.evil.example", "evil.example", "127.0.0.1:+80", "127.0.0.1:0x50",
    "user@127.0.0.1:{port}", "",
]  # fmt: skip
ALLOWED = ["127.0.0.1:{port}", "127.0.0.1", "localhost:{port}", "[::1]:{port}", "[::1]"]


@pytest.fixture
async def port(tmp_path: Path):
    async with running_daemon(make_settings(tmp_path, ws_token=TOKEN)) as daemon:
        yield daemon.web.port


async def test_only_one_loopback_host_port_passes(port: int):
    for value in ALLOWED:
        assert await _get(port, [f"Host: {value.format(port=port)}"]) == 200, value
    for value in REFUSED:
        status = await _get(port, [f"Host: {value.format(port=port)}"])
        assert status in (400, 403), (value, status)
    # The attack run's header: the guard itself refuses it, whatever the server allows.
    assert await _get(port, [f"Host: 127.0.0.1:{port}, evil.example"]) == 403


async def test_two_host_headers_are_refused(port: int):
    lines = [f"Host: 127.0.0.1:{port}", "Host: evil.example"]
    assert await _get(port, lines) in (400, 403)
    assert await _get(port, []) in (400, 403)  # none at all


def test_parse_host_reads_exactly_one_host_and_port():
    assert parse_host("127.0.0.1:8078") == ("127.0.0.1", 8078)
    assert parse_host("[::1]:8078") == ("::1", 8078)
    assert parse_host("localhost") == ("localhost", None)
    for bad in ("127.0.0.1:8078, evil.example", "a b", "[::1]x", "h:", "h:65536", "h:1:2", "@h"):
        assert parse_host(bad) is None, bad
