"""The MCP Inspector CLI (through npx) lists and calls a tool through ``exai shim``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.shim.helpers import shim_command
from tests.shim.inspector import inspector_env, install_inspector, npx_path

pytestmark = pytest.mark.skipif(npx_path() is None, reason="npx is not installed (needs Node.js)")


def _inspect(prefix: Path, env: dict[str, str], cwd: Path, *method: str) -> dict:
    forwarded = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    out = subprocess.run(
        [str(npx_path()), "--prefix", str(prefix), "--no-install", "mcp-inspector", "--cli",
         *forwarded, *shim_command(), *method],
        env=inspector_env(prefix), cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_inspector_lists_and_calls_a_tool(shared_daemon, tmp_path: Path):
    prefix = install_inspector()
    env = {k: v for k, v in shared_daemon.env.items() if k.startswith("EXAI_")}
    listed = _inspect(prefix, env, tmp_path, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert "echo" in tools and tools["echo"]["inputSchema"]["type"] == "object"

    called = _inspect(prefix, env, tmp_path, "--method", "tools/call", "--tool-name", "echo",
                      "--tool-arg", "text=from the inspector")  # fmt: skip
    assert called["isError"] is False
    assert called["content"] == [{"type": "text", "text": "from the inspector"}]
    assert called["structuredContent"]["tool"] == "echo"
