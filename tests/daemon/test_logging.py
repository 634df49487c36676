"""Every log line written during a call carries its session_id and request_id."""

from __future__ import annotations

import json

from tests.conftest import LOG_BUFFER
from tests.daemon.tools import LoggingTool


async def test_call_log_lines_carry_session_and_request(daemon_factory, client_factory):
    daemon = await daemon_factory([LoggingTool()])
    client = await client_factory(daemon)
    mark = LOG_BUFFER.tell()
    await client.call("logs", {"label": "findme"}, request_id="req-log-1")
    await client.call("echo", {"text": "unrelated"}, request_id="req-other")
    lines = [json.loads(line) for line in LOG_BUFFER.getvalue()[mark:].splitlines() if line]
    ours = [line for line in lines if line.get("label") == "findme"]
    assert {line["event"] for line in ours} == {"deep log line", "context log line"}
    for line in ours:
        assert line["session_id"] == client.session_id
        assert line["request_id"] == "req-log-1"
        assert line["tool"] == "logs"
