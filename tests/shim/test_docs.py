"""Every client snippet in docs/ide.md parses, and the command it names runs a working shim.

Snippets are the fenced blocks that follow a ``<!-- snippet: NAME -->`` line.
Each one is read the way its client reads it (JSON, TOML, or the arguments of
``claude mcp add``), and the command, arguments and environment found there are
launched by the official MCP client against a daemon whose token is the
placeholder the docs use, with ``exai`` resolved on ``PATH`` as a user's shell
would resolve it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from exai.bridge.config import load_config
from tests.shim.helpers import DaemonProcess, mcp_session

DOC = Path(__file__).parents[2] / "docs" / "ide.md"
TOKEN = "paste-your-token"
CLIENTS = ["claude-code", "claude-code-project", "claude-desktop", "cursor", "vscode", "codex"]


def snippets() -> dict[str, tuple[str, str]]:
    found = re.findall(r"<!-- snippet: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", DOC.read_text(), re.S)
    return {name: (lang, body) for name, lang, body in found}


def launch_spec(name: str) -> tuple[str, list[str], dict[str, str]]:
    """(command, args, env) as the client named by the snippet would take them."""
    lang, body = snippets()[name]
    if name == "claude-code":
        return _claude_mcp_add(body)
    if lang == "toml":
        server = tomllib.loads(body)["mcp_servers"]["exai"]
        return server["command"], server.get("args", []), server.get("env", {})
    config = json.loads(body)
    if name == "vscode":
        server = config["servers"]["exai"]
        assert server["type"] == "stdio"
        inputs = {i["id"] for i in config["inputs"]}
        env = {k: _vscode_input(v, inputs) for k, v in server.get("env", {}).items()}
        return server["command"], server.get("args", []), env
    server = config["mcpServers"]["exai"]
    return server["command"], server.get("args", []), server.get("env", {})


def _vscode_input(value: str, inputs: set[str]) -> str:
    def answer(match: re.Match[str]) -> str:
        assert match[1] in inputs, f"${{input:{match[1]}}} has no entry in 'inputs'"
        return TOKEN

    return re.sub(r"\$\{input:([\w-]+)\}", answer, value)


def _claude_mcp_add(body: str) -> tuple[str, list[str], dict[str, str]]:
    words = shlex.split(body)
    assert words[:3] == ["claude", "mcp", "add"]
    split = words.index("--")
    options, command = words[3:split], words[split + 1 :]
    env: dict[str, str] = {}
    positional: list[str] = []
    it = iter(options)
    for word in it:
        if word in ("-e", "--env"):
            key, _, value = next(it).partition("=")
            env[key] = value
        elif word in ("-s", "--scope", "-t", "--transport"):
            next(it)
        else:
            positional.append(word)
    assert positional == ["exai"], "the server is named exai"
    return command[0], command[1:], env


def test_every_client_has_a_snippet():
    assert set(CLIENTS) | {"bridge"} <= set(snippets())


@pytest.mark.parametrize("name", CLIENTS)
def test_snippet_names_exai_shim(name: str):
    command, args, env = launch_spec(name)
    assert (command, args) == ("exai", ["shim"])
    assert env == {"EXAI_WS_TOKEN": TOKEN}


def test_bridge_snippet_is_a_valid_servers_file(tmp_path: Path):
    path = tmp_path / "servers.json"
    path.write_text(snippets()["bridge"][1])
    config = load_config(path, {"HOME": "/home/me", "SEARCH_TOKEN": "s3cret"})
    files, search = config.servers["files"], config.servers["search"]
    assert files.transport == "stdio" and files.args[-1] == "/home/me/projects"
    assert not files.permits("write_file") and files.permits("read_file")
    assert search.transport == "http" and search.headers["Authorization"] == "Bearer s3cret"


async def test_each_snippet_launches_a_working_shim(daemon_process, tmp_path: Path):
    daemon: DaemonProcess = daemon_process(EXAI_WS_TOKEN=TOKEN)
    shell_path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    async def run(name: str) -> Any:
        command, args, env = launch_spec(name)
        daemon_env = {k: daemon.env[k] for k in ("EXAI_WS_PORT", "EXAI_DATA_DIR", "EXAI_LOG_LEVEL")}
        env = {**env, **daemon_env, "PATH": shell_path}
        async with mcp_session(env, tmp_path, command=[command, *args]) as mcp:
            assert "echo" in {t.name for t in (await mcp.list_tools()).tools}
            res = await mcp.call_tool("echo", {"text": name})
            return res.content[0].text

    assert await asyncio.gather(*(run(name) for name in CLIENTS)) == CLIENTS
