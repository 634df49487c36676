"""A tool call that lasts over 90 s completes in both real clients, configured as the docs say.

Claude Code runs with the ``MCP_TOOL_TIMEOUT`` docs/ide.md tells users to set,
Codex with the table's ``tool_timeout_sec``. Both calls start when the suite is
collected (see ``long_calls.py``) and run while other tests do.
"""

from __future__ import annotations

import pytest

from tests.clients.conftest import LONG_CALLS
from tests.clients.scripted import continuation_id_in

pytestmark = pytest.mark.timeout(420)


def test_a_call_over_90_seconds_completes_in_claude_code_and_codex() -> None:
    results = LONG_CALLS.results()
    assert set(results) == {"claude-code", "codex"}
    for client, seen in results.items():
        (answer,) = seen
        assert not answer.is_error, (client, answer.text)
        assert "emulated reply #1 to: Take your time." in answer.text, (client, answer.text)
        assert continuation_id_in(answer.text), (client, answer.text)
        # The daemon's own measure of the call, past 90 s.
        assert '"latency_ms":9' in answer.text.replace(" ", ""), (client, answer.text)
