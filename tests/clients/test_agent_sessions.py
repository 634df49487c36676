"""Real agents' sessions become threads a person can open: Claude Code on
``/v1/messages`` and Codex on ``/v1/responses``, each configured as docs/agents.md
says, three turns each (the first with a tool round), resumed the agents' own way
(``claude --continue``, ``codex exec resume --last``), then a second session.

Nothing asks the agents to cooperate: the daemon finds each request's thread from
what it continues (docs/agents.md#sessions). The store is read from the daemon's
SQLite file, as ``exai conversations`` reads it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from exai.store.base import ANY_OWNER, StoredMessage, Thread
from exai.store.sqlite import SqliteStore
from tests.clients.daemon import daemon_env
from tests.clients.model_agents import AgentRun, claude_env, codex_env, run_claude, run_codex
from tests.shim.helpers import DaemonProcess

pytestmark = pytest.mark.timeout(300)

SECRET = "the secret word is pelican"
FIRST, SECOND, THIRD = "What is the secret word in notes.txt?", "Which file did you read?", "Bye."
# Bounds the wait for the daemon's keeper, which writes a turn just after its answer.
KEPT_WITHIN_S = 30


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, provider_emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    running = DaemonProcess(tmp_path_factory.mktemp("sessions-daemon"),
                            **daemon_env(provider_emulator)).start()  # fmt: skip
    yield running
    running.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "notes.txt").write_text(SECRET + "\n")
    return path


def _script(emulator: EmulatorServer, tool: str, arguments: dict[str, str]) -> None:
    emulator.reset()
    emulator.script(
        {"tool_calls": [{"name": tool, "arguments": arguments}], "when": {"offers_tool": tool}},
        {"text": "The file says: {last_tool_result}", "when": {"last_role": "tool"}},
        {"text": "I read notes.txt.", "when": {"offers_tool": tool}},
        {"text": "Goodbye.", "when": {"offers_tool": tool}},
        {"text": "A new session.", "when": {"offers_tool": tool}},
    )


async def _sessions(path: Path, face: str) -> list[tuple[Thread, list[StoredMessage]]]:
    store = await SqliteStore.open(path)
    try:
        threads = await store.list_threads(ANY_OWNER, face=face)
        return [(t, await store.messages(t.id, ANY_OWNER)) for t in reversed(threads)]
    finally:
        await store.aclose()


def _kept(
    daemon: DaemonProcess, face: str, turns: list[int]
) -> list[tuple[Thread, list[StoredMessage]]]:
    """The face's sessions, oldest first, once they hold ``turns`` turns each."""
    path = daemon.workdir / "data" / "conversations.sqlite3"
    deadline = time.monotonic() + KEPT_WITHIN_S
    while True:
        sessions = asyncio.run(_sessions(path, face))
        if [t.turns for t, _ in sessions] == turns or time.monotonic() > deadline:
            return sessions
        time.sleep(0.2)


def _ok(run: AgentRun) -> None:
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])


def _check_first_session(thread: Thread, messages: list[StoredMessage], tool: str) -> None:
    (call,) = [c for m in messages if m.tool_calls for c in m.tool_calls]
    assert call["function"]["name"] == tool
    (result,) = [m for m in messages if m.role == "tool"]
    assert result.tool_call_id == call["id"] and SECRET in (result.content or "")
    said = [m.content for m in messages if m.role == "assistant" and m.content]
    assert said[0].startswith("The file says:") and said[1:] == ["I read notes.txt.", "Goodbye."]
    asked = json.dumps([m.content or m.extra for m in messages if m.role == "user"])
    for prompt in (FIRST, SECOND, THIRD):
        assert asked.count(prompt) == 1, asked  # each turn kept once
    assert thread.title == FIRST and thread.session_ref


def test_claude_code_sessions_are_threads_resumed_by_continue(
    daemon, provider_emulator, project, tmp_path
):
    _script(provider_emulator, "Read", {"file_path": str(project / "notes.txt")})
    env = claude_env(tmp_path / "home", f"http://127.0.0.1:{daemon.http_port}")
    _ok(run_claude(project, env, FIRST))
    _ok(run_claude(project, env, SECOND, "--continue"))
    _ok(run_claude(project, env, THIRD, "--continue"))
    _ok(run_claude(project, env, "Start afresh."))
    (first, messages), (second, _) = _kept(daemon, "anthropic", [4, 1])
    assert first.client is not None and first.client.startswith("Claude Code ")
    assert second.client == first.client and second.session_ref != first.session_ref
    _check_first_session(first, messages, "Read")


def test_codex_sessions_are_threads_resumed_by_exec_resume(
    daemon, provider_emulator, project, tmp_path
):
    _script(provider_emulator, "exec_command", {"cmd": "cat notes.txt"})
    env = codex_env(tmp_path / "home", f"http://127.0.0.1:{daemon.http_port}")
    _ok(run_codex(project, env, FIRST, keep=True))
    _ok(run_codex(project, env, SECOND, resume=True))
    _ok(run_codex(project, env, THIRD, resume=True))
    _ok(run_codex(project, env, "Start afresh.", keep=True))
    (first, messages), (second, _) = _kept(daemon, "responses", [4, 1])
    assert first.client is not None and first.client.startswith("Codex ")
    assert second.session_ref != first.session_ref
    _check_first_session(first, messages, "exec_command")
