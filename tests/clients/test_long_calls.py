"""A tool call that lasts over 90 s completes in both real clients, configured as the docs say.

Claude Code runs with the ``MCP_TOOL_TIMEOUT`` docs/ide.md tells users to set,
Codex with the table's ``tool_timeout_sec``. Both calls start when the suite is
collected (see ``long_calls.py``) and run while other tests do.
"""

from __future__ import annotations

import re

import pytest

from tests.clients.conftest import LONG_CALLS
from tests.clients.long_calls import LATENCY_MS
from tests.clients.scripted import continuation_id_in

pytestmark = pytest.mark.timeout(420)

# A "latency_ms" field of the result, as JSON or as JSON quoted inside a string.
_LATENCY_MS = re.compile(r'latency_ms\\?"?\s*:\s*([0-9][0-9.]*)')


def test_a_call_over_90_seconds_completes_in_claude_code_and_codex() -> None:
    results = LONG_CALLS.results()
    assert set(results) == {"claude-code", "codex"}
    for client, seen in results.items():
        (answer,) = seen
        assert not answer.is_error, (client, answer.text)
        assert "emulated reply #1 to: Take your time." in answer.text, (client, answer.text)
        assert continuation_id_in(answer.text), (client, answer.text)
        # The daemon's own measure of the call: no shorter than the provider's scripted wait.
        latencies = [float(found) for found in _LATENCY_MS.findall(answer.text)]
        assert latencies and min(latencies) >= LATENCY_MS, (client, latencies, answer.text)
