"""A token the daemon refuses, as the real clients show it to their user.

``exai shim`` configured with docs/ide.md's snippets, whose token
(``paste-your-token``) this daemon does not accept. The shim fails the MCP
handshake with the ``UNAUTHORIZED`` message; a client that skips the handshake
(Claude Code speaks 2026-07-28, which has none) gets it when it lists the tools.
docs/ide.md's troubleshooting quotes what is asserted here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.claude_code import ClaudeCode
from tests.clients.codex import Codex
from tests.clients.install import claude_binary, codex_binary
from tests.clients.scripted import Script
from tests.shim.helpers import DaemonProcess

pytestmark = pytest.mark.timeout(300)

REFUSED = "UNAUTHORIZED: the exai daemon at ws://127.0.0.1:{port} refused the token: invalid token"


@pytest.fixture(scope="module")
def refusing_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """A daemon whose token is not the one the docs' snippets carry."""
    daemon = DaemonProcess(tmp_path_factory.mktemp("refusing-daemon"),
                           EXAI_WS_TOKEN="not-the-token-in-the-docs").start()  # fmt: skip
    yield daemon
    daemon.stop()


def test_claude_code_lists_the_server_with_the_refusal(
    tmp_path: Path, project: Path, refusing_daemon: DaemonProcess
) -> None:
    client = ClaudeCode(claude_binary(), home=tmp_path / "home", daemon=refusing_daemon).start()
    try:
        client.add_server(project)
        shown = {
            command: subprocess.run([str(client.binary), "mcp", command, *extra],
                                    env=client.env(), cwd=project, capture_output=True,
                                    text=True, timeout=120).stdout
            for command, extra in (("list", []), ("get", ["exai"]))
        }  # fmt: skip
    finally:
        client.stop()
    refused = REFUSED.format(port=refusing_daemon.port)
    assert f"exai: exai shim - ! Connected · tools fetch failed — {refused}" in shown["list"]
    assert "Status: ! Connected · tools fetch failed" in shown["get"]
    assert f"Issue: {refused}" in shown["get"]
    assert "Set EXAI_WS_TOKEN (or --token) to a token the daemon accepts" in shown["get"]


def test_codex_refuses_to_start_with_the_refusal(
    tmp_path: Path, project: Path, refusing_daemon: DaemonProcess
) -> None:
    client = Codex(codex_binary(), home=tmp_path / "home", daemon=refusing_daemon).start()
    client.api.script = Script([])
    try:
        proc = subprocess.run(client.argv(project), env=client.env(), cwd=project,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=180)  # fmt: skip
    finally:
        client.stop()
    refused = REFUSED.format(port=refusing_daemon.port)
    assert proc.returncode != 0
    assert (
        "required MCP servers failed to initialize: exai: handshaking with MCP server "
        f"failed: JSON-RPC error: -32600: {refused}"
    ) in proc.stderr, proc.stderr[-3000:]
    assert not client.api.requests  # no turn was started without exai's tools
