"""The real Claude Code (2.1.330) calls exai through the shim, and its model sees every answer.

Each test runs ``claude -p`` headless against a scripted stand-in for the
Anthropic API and asserts on the tool results Claude Code handed its model:
the text a real model would have read, not what the shim sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.claude_code import ClaudeCode
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


def test_model_sees_both_chat_turns_and_continues_the_thread(
    claude_code: ClaudeCode, project: Path, provider_emulator: EmulatorServer
) -> None:
    provider_emulator.reset()
    seen = claude_code.run(project, Script(chat_turns(search="second opinion from kimi or glm")))
    check_chat_turns(seen, provider_emulator)
    # The model found chat by searching descriptions, as Claude Code makes it.
    assert any("mcp__exai__chat" in s.text for s in claude_code.api.searches)


def test_model_sees_a_workflow_step_and_what_to_do_next(
    claude_code: ClaudeCode, project: Path
) -> None:
    seen = claude_code.run(project, Script([review_step(project)]))
    check_review_step(seen)


def test_model_sees_consensus(
    claude_code: ClaudeCode, project: Path, provider_emulator: EmulatorServer
) -> None:
    provider_emulator.reset()
    seen = claude_code.run(project, Script([consensus_call()]))
    check_consensus(seen)


def test_model_reads_a_validation_error(claude_code: ClaudeCode, project: Path) -> None:
    seen = claude_code.run(project, Script([validation_error_call()]))
    check_validation_error(seen)


def test_model_reads_tool_not_found(claude_code: ClaudeCode, project: Path) -> None:
    try:
        seen = claude_code.run(project, Script([tool_not_found_call(claude_code.daemon)]))
    finally:
        claude_code.daemon.stop()
        claude_code.daemon.start(EXAI_TOOLS_DENY="")
    check_tool_not_found(seen)
