"""The real Claude Code (2.1.330) and Codex CLI (0.169.0) call exai, and their models see
every answer: through ``exai shim`` and through the daemon's own ``/mcp``.

Each test runs the client headless (``claude -p``, ``codex exec``), configured
with docs/ide.md's own snippet, against a scripted stand-in for its model API,
and asserts on the tool results the client handed its model: the text a real
model would have read, not what exai sent. Both clients defer MCP tools behind
a search tool (Claude Code's ToolSearch, Codex's tool_search for its catalogue
models), so the scripted model finds each exai tool by searching, as a real
one must.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.claude_code import ClaudeCode
from tests.clients.codex import Codex
from tests.clients.scenarios import (
    chat_turns,
    check_chat_turns,
    check_consensus,
    check_review_step,
    check_tool_not_found,
    check_validation_error,
    consensus_call,
    review_step,
    tool_not_found_call,
    validation_error_call,
)
from tests.clients.scripted import Script

pytestmark = pytest.mark.timeout(300)

Client = ClaudeCode | Codex


def test_model_sees_both_chat_turns_and_continues_the_thread(
    ide: Client, project: Path, provider_emulator: EmulatorServer
) -> None:
    provider_emulator.reset()
    seen = ide.run(project, Script(chat_turns(search="second opinion from kimi or glm")))
    check_chat_turns(seen, provider_emulator)
    # The model found chat by searching the tools' descriptions, as the client makes it.
    assert any("chat" in s.text for s in ide.api.searches), ide.api.searches


def test_model_sees_a_workflow_step_and_what_to_do_next(ide: Client, project: Path) -> None:
    seen = ide.run(project, Script([review_step(project)]))
    check_review_step(seen)


def test_model_sees_consensus(
    ide: Client, project: Path, provider_emulator: EmulatorServer
) -> None:
    provider_emulator.reset()
    seen = ide.run(project, Script([consensus_call()]))
    check_consensus(seen)


def test_model_reads_a_validation_error(ide: Client, project: Path) -> None:
    seen = ide.run(project, Script([validation_error_call()]))
    check_validation_error(seen)


def test_model_reads_tool_not_found(ide: Client, project: Path) -> None:
    try:
        seen = ide.run(project, Script([tool_not_found_call(ide.daemon)]))
    finally:
        ide.daemon.stop()
        ide.daemon.start(EXAI_TOOLS_DENY="")
    check_tool_not_found(seen)
