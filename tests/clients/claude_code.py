"""The real Claude Code, headless, configured as docs/ide.md says, against a scripted API.

A TEST DRIVER. Claude Code runs in ``--print`` mode with its own ``HOME``, so
nothing of the developer's configuration is read. Its MCP server is added with
the exact ``claude mcp add`` command from docs/ide.md (``exai`` resolved on
``PATH`` as a user's shell would), and it talks to
:class:`~tests.clients.anthropic_api.AnthropicStandIn` instead of Anthropic.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.clients.anthropic_api import MARKER, AnthropicStandIn
from tests.clients.scripted import Observation, Script, write_transcript
from tests.shim.helpers import DaemonProcess
from tests.shim.test_docs import snippets

__all__ = ["DEFAULT_MCP_URL", "ClaudeCode", "docs_env"]

# Where docs/ide.md's HTTP snippets point: the daemon's /mcp on the default port.
DEFAULT_MCP_URL = "http://127.0.0.1:8078/mcp"


def docs_env(name: str) -> dict[str, str]:
    """``KEY=value`` lines of a docs/ide.md ``env`` snippet, e.g. the long-call settings."""
    _, body = snippets()[name]
    pairs = (line.split("=", 1) for line in body.splitlines() if "=" in line)
    return {k.strip().removeprefix("export "): v.strip() for k, v in pairs}


class ClaudeCode:
    def __init__(
        self, binary: Path, *, home: Path, daemon: DaemonProcess, transport: str = "stdio"
    ) -> None:
        self.binary = binary
        self.home = home
        self.daemon = daemon
        self.transport = transport  # "stdio" (the shim) or "http" (the daemon's /mcp)
        self.api = AnthropicStandIn()

    def start(self) -> ClaudeCode:
        self.api.start()
        return self

    def stop(self) -> None:
        self.api.stop()

    def env(self, **extra: str) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        return {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": self.api.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # The shim reads EXAI_* from the environment Claude Code hands it.
            "EXAI_WS_PORT": str(self.daemon.port),
            "EXAI_LOG_LEVEL": "warning",
            **extra,
        }

    def add_server(self, project: Path) -> None:
        """Run docs/ide.md's ``claude mcp add`` in ``project``, word for word.

        Over HTTP the one change is the port: the test daemon's, not the default.
        """
        if self.transport == "http":
            _, body = snippets()["claude-code-http"]
            body = body.replace(DEFAULT_MCP_URL, self.daemon.mcp_url)
        else:
            _, body = snippets()["claude-code"]
        argv = shlex.split(body.strip())
        assert argv[0] == "claude"
        subprocess.run([str(self.binary), *argv[1:]], env=self.env(), cwd=project,
                       check=True, capture_output=True, timeout=60)  # fmt: skip

    def run(
        self, project: Path, script: Script, *, timeout_s: float = 120, **env: str
    ) -> list[Observation]:
        """Run one headless conversation; the tool results its model saw, in order."""
        self.add_server(project)
        self.api.script = script
        proc = subprocess.run(
            [str(self.binary), "-p", f"{MARKER} use the exai tools", "--output-format", "json",
             "--allowedTools", "mcp__exai"],
            env=self.env(**env), cwd=project, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
        write_transcript("claude-code", script.observations)
        assert proc.returncode == 0 and not result.get("is_error"), (proc.stdout, proc.stderr)
        return list(script.observations)
