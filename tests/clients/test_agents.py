"""Real agents with exai as their model: Claude Code on ``/v1/messages`` and Codex on
``/v1/responses``, each configured as docs/agents.md says, against a daemon whose
providers are the emulator, scripted to call the agent's own tools.

A recording pass-through sits between the agent and the daemon
(:class:`~tests.clients.recorder.RecordingProxy`); one tool round of each is
written to build/agents/."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.daemon import DOC_TOKEN, daemon_env
from tests.clients.install import claude_binary, codex_binary
from tests.clients.recorder import RecordingProxy, write_round
from tests.shim.helpers import DaemonProcess

DOC = Path(__file__).parents[2] / "docs" / "agents.md"
SECRET = "the secret word is pelican"
_NO_NETWORK = "http://127.0.0.1:9"  # nothing listens: a proxied connection is refused


def snippets() -> dict[str, tuple[str, str]]:
    found = re.findall(r"<!-- snippet: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", DOC.read_text(), re.S)
    return {name: (lang, body) for name, lang, body in found}


@pytest.fixture(scope="module")
def agent_daemon(
    tmp_path_factory: pytest.TempPathFactory, provider_emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    daemon = DaemonProcess(
        tmp_path_factory.mktemp("agent-daemon"), **daemon_env(provider_emulator)
    ).start()
    yield daemon
    daemon.stop()


@pytest.fixture
def proxy(agent_daemon: DaemonProcess) -> Iterator[RecordingProxy]:
    recorder = RecordingProxy(f"http://127.0.0.1:{agent_daemon.http_port}")
    recorder.start()
    yield recorder
    recorder.stop()


@pytest.fixture
def emulator(provider_emulator: EmulatorServer) -> EmulatorServer:
    provider_emulator.reset()
    return provider_emulator


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "notes.txt").write_text(SECRET + "\n")
    return path


def _tool_round(exchanges: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    """The request whose answer made the tool call, and the one that returned its result."""
    calls = [n for n, e in enumerate(exchanges) if marker in e["response"].decode(errors="ignore")]
    assert calls, [e["path"] for e in exchanges]
    return exchanges[calls[0] : calls[0] + 2]


# --- Claude Code ----------------------------------------------------------------------------


def _claude_env(home: Path, base_url: str) -> dict[str, str]:
    _, body = snippets()["claude-code-model"]
    exported = dict(re.findall(r"^export (\w+)=(.*)$", body, re.M))
    assert exported["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8078"
    assert exported["ANTHROPIC_API_KEY"] == DOC_TOKEN
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **exported,
        "ANTHROPIC_BASE_URL": base_url,  # the test daemon's port, through the recorder
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def _claude(project: Path, env: dict[str, str], prompt: str, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        [
            str(claude_binary()),
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            "Read",
            *extra,
        ],
        env=env,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    result: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert proc.returncode == 0 and not result.get("is_error"), (proc.stdout, proc.stderr[-3000:])
    return result


def test_claude_code_reads_a_file_with_its_own_tool_and_answers_then_continues(
    tmp_path, emulator, proxy, project
):
    notes = str(project / "notes.txt")
    emulator.script(
        {
            "tool_calls": [{"name": "Read", "arguments": {"file_path": notes}}],
            "reasoning": "the file will tell",
            "when": {"offers_tool": "Read"},
        },
        {"text": "The file says: {last_tool_result}", "when": {"last_role": "tool"}},
    )
    env = _claude_env(tmp_path / "home", proxy.base_url)
    first = _claude(project, env, "What is the secret word in notes.txt?")
    assert "pelican" in first["result"]
    assert first["num_turns"] == 2  # the tool round, then the answer

    emulator.script(
        {
            "text": "You asked about notes.txt; the word was pelican.",
            "when": {"offers_tool": "Read"},
        }
    )
    second = _claude(project, env, "Which file did you read?", "--continue")
    assert "pelican" in second["result"]

    chats = [r["body"] for r in emulator.requests if r["body"].get("tools")]
    sent = chats[-1]["messages"]
    roles = [m["role"] for m in sent]
    # Turn two reached the model with all of turn one: the round and its reasoning.
    call = next(m for m in sent if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "Read"
    assert call["reasoning_content"] == "the file will tell"
    result = next(m for m in sent if m["role"] == "tool")
    assert SECRET in result["content"] and result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert roles.index("tool") < len(roles) - 1
    assert "Which file did you read?" in json.dumps(sent[-3:])
    streamed = [e for e in proxy.exchanges if e["path"] == "/v1/messages"]
    assert all(e["request"].get("stream") for e in streamed)
    assert all(b"event: message_stop" in e["response"] for e in streamed)
    write_round("claude-code", _tool_round(streamed, '"tool_use"'))


# --- Codex ----------------------------------------------------------------------------------


def _codex_home(home: Path, base_url: str) -> Path:
    _, body = snippets()["codex-model"]
    config = tomllib.loads(body)
    assert config["model_providers"]["exai"]["base_url"] == "http://127.0.0.1:8078/v1"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    text = body.replace("http://127.0.0.1:8078/v1", base_url + "/v1")
    (codex_home / "config.toml").write_text(
        text + "\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n"
    )
    return codex_home


def test_codex_runs_a_shell_command_with_its_own_tool_and_answers(
    tmp_path, emulator, proxy, project
):
    emulator.script(
        {
            "tool_calls": [{"name": "exec_command", "arguments": {"cmd": "cat notes.txt"}}],
            "reasoning": "cat will show it",
            "when": {"offers_tool": "exec_command"},
        },
        {"text": "The command printed: {last_tool_result}", "when": {"last_role": "tool"}},
    )
    home = tmp_path / "home"
    codex_home = _codex_home(home, proxy.base_url)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "LANG": "C.UTF-8",
        "EXAI_TOKEN": DOC_TOKEN,
        "HTTP_PROXY": _NO_NETWORK,
        "HTTPS_PROXY": _NO_NETWORK,
        "ALL_PROXY": _NO_NETWORK,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    proc = subprocess.run(
        [
            str(codex_binary()),
            "exec",
            "--json",
            "--strict-config",
            "--skip-git-repo-check",
            "--ephemeral",
            "--cd",
            str(project),
            "What is the secret word in notes.txt?",
        ],
        env=env,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    failed = [e for e in events if e.get("type") in ("turn.failed", "error")]
    assert proc.returncode == 0 and not failed, (proc.stdout, proc.stderr[-3000:])
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    commands = [i for i in items if i.get("type") == "command_execution"]
    assert commands and "cat notes.txt" in commands[0]["command"]
    assert SECRET in commands[0]["aggregated_output"]
    answers = [i["text"] for i in items if i.get("type") == "agent_message"]
    assert answers and SECRET in answers[-1]
    sent = emulator.requests[-1]["body"]["messages"]
    call = next(m for m in sent if m.get("tool_calls"))
    assert call["reasoning_content"] == "cat will show it"  # carried by Codex, encrypted
    assert SECRET in next(m for m in sent if m["role"] == "tool")["content"]
    rounds = [e for e in proxy.exchanges if e["path"] == "/v1/responses"]
    write_round("codex", _tool_round(rounds, '"function_call"'))
