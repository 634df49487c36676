"""A tool call that lasts over 90 s completes in both real clients, configured as the docs say.

Claude Code runs with the ``MCP_TOOL_TIMEOUT`` docs/ide.md tells users to set,
Codex with the table's ``tool_timeout_sec``; both calls run at once, so the
suite waits for one slow provider answer, not two.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.clients.claude_code import ClaudeCode, docs_env
from tests.clients.codex import Codex
from tests.clients.scripted import Call, Observation, Script, continuation_id_in

pytestmark = pytest.mark.timeout(400)

LATENCY_MS = 91_000
PROMPT = f"Take your time. [emulate:latency_ms={LATENCY_MS}]"


def _slow_chat() -> Script:
    return Script([Call("chat", {"prompt": PROMPT}, search="chat kimi glm second opinion")])


def test_a_call_over_90_seconds_completes_in_claude_code_and_codex(
    claude_code: ClaudeCode, codex: Codex, tmp_path: Path
) -> None:
    projects = [tmp_path / "claude", tmp_path / "codex"]
    for project in projects:
        project.mkdir()
    with ThreadPoolExecutor(2) as pool:
        claude = pool.submit(claude_code.run, projects[0], _slow_chat(), timeout_s=300,
                             **docs_env("claude-code-env"))  # fmt: skip
        codex_run = pool.submit(codex.run, projects[1], _slow_chat(), timeout_s=300)
        results: list[list[Observation]] = [claude.result(), codex_run.result()]
    for seen in results:
        (answer,) = seen
        assert not answer.is_error, answer.text
        assert "emulated reply #1 to: Take your time." in answer.text, answer.text
        assert continuation_id_in(answer.text)
        assert '"latency_ms":9' in answer.text.replace(" ", "")  # the daemon's own measure
