"""Real agents with exai as their model: Claude Code on ``/v1/messages`` and Codex on
``/v1/responses``, each configured as docs/agents.md says, against a daemon whose
providers are the emulator, scripted to call the agent's own tools.

A recording pass-through sits between the agent and the daemon
(:class:`~tests.clients.recorder.RecordingProxy`); one tool round of each is
written to build/agents/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.daemon import daemon_env
from tests.clients.model_agents import AgentRun, claude_env, codex_env, run_claude, run_codex
from tests.clients.recorder import RecordingProxy, write_round
from tests.shim.helpers import DaemonProcess

SECRET = "the secret word is pelican"


@pytest.fixture(scope="module")
def agent_daemon(
    tmp_path_factory: pytest.TempPathFactory, provider_emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    # The daemon keeps no reasoning of its own (EXAI_TOOL_REASONING_MAX_MB=0), so what
    # reaches the model with a returned tool round came back in the agent's sealed
    # carrier: Claude Code's thinking signature, Codex's encrypted_content.
    env = {**daemon_env(provider_emulator), "EXAI_TOOL_REASONING_MAX_MB": "0"}
    daemon = DaemonProcess(tmp_path_factory.mktemp("agent-daemon"), **env).start()
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


def _claude(project: Path, env: dict[str, str], prompt: str, *extra: str) -> dict[str, Any]:
    run = run_claude(project, env, prompt, *extra)
    result: dict[str, Any] = json.loads(run.stdout) if run.stdout.strip() else {}
    assert run.returncode == 0 and not result.get("is_error"), (run.stdout, run.stderr[-3000:])
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
    env = claude_env(tmp_path / "home", proxy.base_url)
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
    run: AgentRun = run_codex(project, codex_env(tmp_path / "home", proxy.base_url),
                              "What is the secret word in notes.txt?")  # fmt: skip
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    failed = [e for e in events if e.get("type") in ("turn.failed", "error")]
    assert run.returncode == 0 and not failed, (run.stdout, run.stderr[-3000:])
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
