"""Real agents' sessions become threads a person can open: Claude Code on
``/v1/messages`` and Codex on ``/v1/responses``, each configured as docs/agents.md
says, three turns each (the first with a tool round), resumed the agents' own way
(``claude --continue``, ``codex exec resume --last``), then a second session. A
Claude Code session is then opened in the console with Chromium, as a person reads it.

Nothing asks the agents to cooperate: the daemon finds each request's thread from
what it continues (docs/agents.md#sessions). The store is read from the daemon's
SQLite file, as ``exai conversations`` reads it.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pytest

from exai.emulators.provider import EmulatorServer
from exai.store.base import ANY_OWNER, StoredMessage, Thread
from exai.store.sqlite import SqliteStore
from tests.clients.daemon import DOC_TOKEN, daemon_env
from tests.clients.model_agents import AgentRun, claude_env, codex_env, run_claude, run_codex
from tests.console.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.console.live import wait_until
from tests.console.test_browser import Visitor
from tests.shim.helpers import DaemonProcess

pytestmark = pytest.mark.timeout(300)

SECRET = "the secret word is pelican"
FIRST, SECOND, THIRD = "What is the secret word in notes.txt?", "Which file did you read?", "Bye."
# Bounds the wait for the daemon's keeper, which writes a turn just after its answer.
KEPT_WITHIN_S = 30
ROOT = Path(__file__).resolve().parents[2]
CLAUDE_SHOT = ROOT / "build" / "screenshots" / "claude-code-session.png"

T = TypeVar("T")


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, provider_emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    running = DaemonProcess(tmp_path_factory.mktemp("sessions-daemon"),
                            **daemon_env(provider_emulator)).start()  # fmt: skip
    yield running
    running.stop()


@pytest.fixture
def chromium() -> Iterator[Any]:
    """Debian's Chromium, started as the console's browser tests start it
    (tests/console/conftest.py), for one test: Playwright's event loop holds the
    thread while it runs, so the module's other tests (asyncio.run) must not share it."""
    if not CHROMIUM.exists():
        pytest.fail("the console's browser tests need Debian's chromium: run `make browser`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


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


def _claude_code(
    daemon: DaemonProcess, emulator: EmulatorServer, project: Path, home: Path
) -> Callable[..., None]:
    """Claude Code in ``project``, configured as docs/agents.md says, with the emulated
    model reading notes.txt with its Read tool: each call is one turn, ``prompt`` and
    Claude Code's own flags (``--continue``), which must succeed."""
    _script(emulator, "Read", {"file_path": str(project / "notes.txt")})
    env = claude_env(home, f"http://127.0.0.1:{daemon.http_port}")

    def turn(prompt: str, *flags: str) -> None:
        _ok(run_claude(project, env, prompt, *flags))

    return turn


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
    claude = _claude_code(daemon, provider_emulator, project, tmp_path / "home")
    claude(FIRST)
    claude(SECOND, "--continue")
    claude(THIRD, "--continue")
    claude("Start afresh.")
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


def _apart(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` on a thread of its own, where asyncio.run may start a loop while
    Playwright's holds this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args).result()


def _usd(text: str) -> Decimal:
    assert re.fullmatch(r"\d+\.\d+ USD", text), text
    return Decimal(text.split()[0])


def test_a_claude_code_session_reads_in_the_console_as_its_transcript(
    daemon, provider_emulator, project, tmp_path, chromium
):
    """Claude Code asks twice (a Read tool round, then ``--continue``), and the session
    is opened in the console as the token's principal sees it; the page's screenshot
    is written to build/screenshots/claude-code-session.png (docs/images/console/
    holds a copy)."""
    # A first prompt of its own: the module's daemon may already hold a session that
    # starts with FIRST, and a request whose input is a kept turn's is its retry.
    asked = "Read notes.txt and tell me the secret word."
    path = daemon.workdir / "data" / "conversations.sqlite3"
    earlier = [t.turns for t, _ in _apart(asyncio.run, _sessions(path, "anthropic"))]
    claude = _claude_code(daemon, provider_emulator, project, tmp_path / "home")
    claude(asked)
    claude(SECOND, "--continue")
    # Three turns: the tool call, the answer once its result is back, the second ask.
    *_, (session, _) = _apart(_kept, daemon, "anthropic", [*earlier, 3])
    assert session.turns == 3 and session.title == asked

    person = Visitor(chromium, f"http://127.0.0.1:{daemon.http_port}")
    try:
        person.sign_in(DOC_TOKEN, f"/console/threads/{session.id}")
        page = person.page
        turns, costs = page.locator("article.turn"), page.locator("article.turn .cost")

        def costed() -> bool:  # a turn's cost row may be written just after the turn
            page.reload()
            return costs.count() == 3

        wait_until(costed, timeout_s=KEPT_WITHIN_S, what="the turns' costs")
        assert page.locator("main > h1").inner_text() == asked
        badge = page.locator("p.session .badge").inner_text()
        assert re.fullmatch(r"Claude Code [\d.]+ · /v1/messages", badge), badge
        assert turns.count() == 3
        assert asked in turns.nth(0).inner_text()
        answered = turns.nth(1).locator("section.msg.assistant").inner_text()
        assert "The file says:" in answered and SECRET in answered  # Read numbers lines
        assert SECOND in turns.nth(2).inner_text()
        assert "I read notes.txt." in turns.nth(2).inner_text()

        call, result = page.locator("details.tool-call"), page.locator("details.tool-result")
        assert call.count() == 1 and result.count() == 1
        assert call.locator("summary .tool-name").inner_text() == "Read"
        call.locator("summary").click()
        assert str(project / "notes.txt") in call.inner_text()
        call.locator("a:text('Its result')").click()  # opens the result it is tied to
        page.wait_for_function("() => document.querySelector('details.tool-result').open")
        assert "Result of Read" in result.locator("summary").inner_text()
        assert SECRET in result.locator("pre.output").inner_text()

        each = [_usd(text) for text in costs.all_inner_texts()]
        assert _usd(page.locator("strong.cost.total").inner_text()) == sum(each)
        assert page.locator("section.continue h2").inner_text() == "Continue in a fork"
        hint = page.locator("#fork-hint").inner_text()
        assert hint.startswith("Continue in a fork — a chat with exai's model, without the")
        assert page.locator("form.say button[type=submit]").inner_text() == "Fork and send"
        CLAUDE_SHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(CLAUDE_SHOT), full_page=True)
        assert person.problems == []
    finally:
        person.close()
