"""Log lines: every one written during a call carries its session_id and request_id,
and what a client sends cannot put control characters on the reader's terminal."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect

from exai.audit.scrub import log_scrubber
from exai.logs import configure_logging
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


# ESC (a screen clear and a title change), BEL, backspace, NUL, the one-byte CSI,
# DEL, a right-to-left override; no space or quote, which would make the console
# renderer quote the value with repr() anyway.
NASTY = "a\x1b[2Jb\x1b]0;owned\x07c\x08d\x00e\x9b31mf\x7fg\u202eh"
_RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]")  # all but line breaks


async def _nasty_lines(daemon, client) -> None:
    """Log lines that carry client-chosen text: a call's request_id and argument, and
    the request_id of a cancel for a call that does not exist."""
    await client.call("logs", {"label": NASTY}, request_id=NASTY)
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"op": "hello"}))
        await ws.recv()
        await ws.send(json.dumps({"op": "cancel", "request_id": NASTY}))
        await ws.recv()


@pytest.fixture
def console_log() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    configure_logging("console", "info", stream=buffer, scrubber=log_scrubber())
    yield buffer
    configure_logging("json", "info", stream=LOG_BUFFER, scrubber=log_scrubber())


async def test_control_characters_from_a_client_are_escaped_in_the_console_log(
    console_log, daemon_factory, client_factory
):
    daemon = await daemon_factory([LoggingTool()])
    await _nasty_lines(daemon, await client_factory(daemon))
    text = console_log.getvalue()
    ours = [line for line in text.splitlines() if "owned" in line]
    assert len(ours) == 3, text  # deep log line, context log line, frame rejected
    assert _RAW_CONTROL.findall(text) == []
    assert "\\x1b[2J" in ours[0] and "\\x07" in ours[0] and "\\u202e" in ours[0]


async def test_control_characters_from_a_client_are_escaped_in_the_json_log(
    daemon_factory, client_factory
):
    daemon = await daemon_factory([LoggingTool()])
    mark = LOG_BUFFER.tell()
    await _nasty_lines(daemon, await client_factory(daemon))
    text = LOG_BUFFER.getvalue()[mark:]
    assert _RAW_CONTROL.findall(text) == []
    lines = [json.loads(line) for line in text.splitlines() if "owned" in line]
    assert len(lines) == 3
    assert all(line["request_id"].startswith("a\x1b[2Jb\x1b]0;owned\x07") for line in lines)
