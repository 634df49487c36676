"""The real Codex CLI, headless, configured as docs/ide.md says, against a scripted API.

A TEST DRIVER. ``codex exec`` runs with its own ``HOME`` and ``CODEX_HOME``, so
nothing of the developer's configuration is read. Its ``config.toml`` names a
model provider that speaks the Responses API to
:class:`~tests.clients.responses_api.ResponsesStandIn`, then carries the
``[mcp_servers.exai]`` table of docs/ide.md word for word (``exai`` resolved on
``PATH`` as a user's shell would), including its ``env_vars``, approval mode
and ``required``. A test that hands the shim more settings adds their names
to ``env_vars`` with ``-c``.

Codex also syncs a plugin catalogue from GitHub and exports metrics to
OpenAI; both are turned off, and a proxy that refuses every connection stands
in front of anything that is not loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from tests.clients.claude_code import DEFAULT_MCP_URL
from tests.clients.daemon import DOC_TOKEN
from tests.clients.responses_api import MARKER, ResponsesStandIn
from tests.clients.scripted import Observation, Script, write_transcript
from tests.shim.helpers import DaemonProcess
from tests.shim.test_docs import snippets

__all__ = ["DEFERRED_MODEL", "DIRECT_MODEL", "Codex"]

# A model in Codex 0.169.0's catalogue for which it defers MCP tools behind tool_search.
DEFERRED_MODEL = "gpt-5.5"
# A model it does not know: it falls back to offering MCP tools as plain functions.
DIRECT_MODEL = "exai-stand-in"
_KEY = "EXAI_TEST_RESPONSES_KEY"
# Port 9 (discard) on loopback: nothing listens, so a proxied connection is refused.
_NO_NETWORK = "http://127.0.0.1:9"


class Codex:
    def __init__(
        self,
        binary: Path,
        *,
        home: Path,
        daemon: DaemonProcess,
        model: str = DEFERRED_MODEL,
        transport: str = "stdio",
    ) -> None:
        self.transport = transport  # "stdio" (the shim) or "http" (the daemon's /mcp)
        self.binary = binary
        self.home = home
        self.codex_home = home / ".codex"
        self.daemon = daemon
        self.model = model
        self.api = ResponsesStandIn()
        # The JSONL events of the last run (``codex exec --json``), for diagnosis.
        self.events: list[dict[str, Any]] = []

    def start(self) -> Codex:
        self.api.start()
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(self.config())
        return self

    def stop(self) -> None:
        self.api.stop()

    def config(self) -> str:
        """``config.toml``: the stand-in as model provider, then docs/ide.md's table verbatim."""
        lang, body = snippets()["codex-http" if self.transport == "http" else "codex"]
        body = body.replace(DEFAULT_MCP_URL, self.daemon.mcp_url)  # the test daemon's port
        assert lang == "toml" and list(tomllib.loads(body)) == ["mcp_servers"], body
        return (
            f'model_provider = "exai-test"\n'
            f"\n[model_providers.exai-test]\n"
            f'name = "exai test stand-in"\n'
            f'base_url = "{self.api.base_url}/v1"\n'
            f'env_key = "{_KEY}"\n'
            f'wire_api = "responses"\n'
            f"\n[analytics]\nenabled = false\n"
            f"\n[features]\nplugins = false\n"
            f"\n{body}\n"
        )

    def env(self, **extra: str) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        return {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "LANG": "C.UTF-8",
            _KEY: "sk-test",
            "HTTP_PROXY": _NO_NETWORK,
            "HTTPS_PROXY": _NO_NETWORK,
            "ALL_PROXY": _NO_NETWORK,
            "NO_PROXY": "127.0.0.1,localhost",
            "EXAI_WS_PORT": str(self.daemon.port),
            "EXAI_WS_TOKEN": DOC_TOKEN,  # what the HTTP table's bearer_token_env_var names
            "EXAI_LOG_LEVEL": "warning",
            **extra,
        }

    def argv(self, project: Path, *shim_env: str) -> list[str]:
        overrides: list[str] = []
        if shim_env:
            _, body = snippets()["codex"]
            listed = tomllib.loads(body)["mcp_servers"]["exai"].get("env_vars", [])
            overrides = ["-c", f"mcp_servers.exai.env_vars={json.dumps([*listed, *shim_env])}"]
        return [
            str(self.binary), "exec", "--json", "--strict-config", "--skip-git-repo-check",
            "--ephemeral", "--model", self.model, "--cd", str(project), *overrides,
            f"{MARKER} use the exai tools",
        ]  # fmt: skip

    def run(
        self, project: Path, script: Script, *, timeout_s: float = 120, **env: str
    ) -> list[Observation]:
        """Run one headless conversation; the tool results its model saw, in order.

        ``env`` reaches the shim too: its names are added to the table's ``env_vars``.
        """
        self.api.script = script
        proc = subprocess.run(
            self.argv(project, *env), env=self.env(**env), cwd=project,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
        lines = proc.stdout.splitlines()
        self.events = [json.loads(line) for line in lines if line.startswith("{")]
        failed = [e for e in self.events if e.get("type") in ("turn.failed", "error")]
        write_transcript("codex", script.observations)
        assert proc.returncode == 0 and not failed, (proc.stdout, proc.stderr[-4000:])
        return list(script.observations)
