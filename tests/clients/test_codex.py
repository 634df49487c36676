"""The real Codex CLI (0.169.0) calls exai through the shim, and its model sees every answer.

Each test runs ``codex exec`` headless against a scripted stand-in for the
OpenAI Responses API and asserts on the ``function_call_output`` s Codex
handed its model: the text a real model would have read, not what the shim
sent. For the catalogue model the driver uses, Codex defers MCP tools behind
its ``tool_search`` tool, so the scripted model finds each exai tool by
searching, as a real one must.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.emulators.provider import EmulatorServer
from tests.clients.codex import DIRECT_MODEL, Codex
from tests.clients.install import codex_binary
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
from tests.shim.helpers import DaemonProcess

pytestmark = pytest.mark.timeout(300)


def test_model_sees_both_chat_turns_and_continues_the_thread(
    codex: Codex, project: Path, provider_emulator: EmulatorServer
) -> None:
    provider_emulator.reset()
    seen = codex.run(project, Script(chat_turns(search="second opinion from kimi or glm")))
    check_chat_turns(seen, provider_emulator)
    # The model found chat by searching descriptions, as Codex makes it.
    assert any('"name": "chat"' in s.text for s in codex.api.searches), codex.api.searches


def test_model_sees_chat_when_codex_offers_the_tools_up_front(
    tmp_path: Path, project: Path, client_daemon: DaemonProcess, provider_emulator: EmulatorServer
) -> None:
    """For a model it has no metadata for, Codex lists MCP tools directly, without tool_search."""
    provider_emulator.reset()
    client = Codex(codex_binary(), home=tmp_path / "home", daemon=client_daemon,
                   model=DIRECT_MODEL).start()  # fmt: skip
    try:
        seen = client.run(project, Script(chat_turns()))
    finally:
        client.stop()
    check_chat_turns(seen, provider_emulator)
    assert not client.api.searches


def test_model_sees_a_workflow_step_and_what_to_do_next(codex: Codex, project: Path) -> None:
    seen = codex.run(project, Script([review_step(project)]))
    check_review_step(seen)


def test_model_sees_consensus(
    codex: Codex, project: Path, provider_emulator: EmulatorServer
) -> None:
    provider_emulator.reset()
    seen = codex.run(project, Script([consensus_call()]))
    check_consensus(seen)


def test_model_reads_a_validation_error(codex: Codex, project: Path) -> None:
    seen = codex.run(project, Script([validation_error_call()]))
    check_validation_error(seen)


def test_model_reads_tool_not_found(codex: Codex, project: Path) -> None:
    try:
        seen = codex.run(project, Script([tool_not_found_call(codex.daemon)]))
    finally:
        codex.daemon.stop()
        codex.daemon.start(EXAI_TOOLS_DENY="")
    check_tool_not_found(seen)
