"""/mcp answers a 2026-07-28 call that asked for no progress as JSON, turns a long one
into a stream of pings, streams progress when a token asks for it, and cancels the
call of a client that leaves."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import exai.web.mcp_calls
from tests.web.helpers import MODERN, TOKEN, mcp_daemon, mcp_url, tools_call

HEADERS = {**MODERN, "Authorization": f"Bearer {TOKEN}"}


def _with_token(body: dict[str, Any], token: str) -> dict[str, Any]:
    body["params"]["_meta"]["progressToken"] = token
    return body


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines()
            if line.startswith("data: ")]  # fmt: skip


async def test_a_call_without_a_progress_token_is_one_json_answer(tmp_path: Path):
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        answer = await http.post(mcp_url(daemon), json=tools_call(text="plain"), headers=HEADERS)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["result"]["content"][0]["text"] == "plain"


async def test_a_long_call_without_a_token_becomes_a_stream_of_pings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(exai.web.mcp_calls, "STREAM_AFTER_S", 0.2)
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        answer = await http.post(mcp_url(daemon), json=tools_call(text="late", delay_s=0.9),
                                 headers=HEADERS)  # fmt: skip
    assert answer.headers["content-type"] == "text/event-stream"
    assert answer.text.count(": ping") >= 2
    (message,) = _events(answer.text)
    assert message["id"] == 1 and message["result"]["content"][0]["text"] == "late"


async def test_a_progress_token_gets_the_daemons_progress_as_notifications(tmp_path: Path):
    async with mcp_daemon(tmp_path, progress_interval_s=0.2) as daemon, httpx.AsyncClient() as http:
        body = _with_token(tools_call(text="slow", delay_s=1.0), "tok-1")
        answer = await http.post(mcp_url(daemon), json=body, headers=HEADERS)
    assert answer.headers["content-type"] == "text/event-stream"
    *notes, last = _events(answer.text)
    assert notes and {n["method"] for n in notes} == {"notifications/progress"}
    assert {n["params"]["progressToken"] for n in notes} == {"tok-1"}
    assert last["result"]["content"][0]["text"] == "slow"


@pytest.mark.parametrize("token", [None, "tok-2"], ids=["json", "progress"])
async def test_a_client_that_leaves_cancels_its_call(tmp_path: Path, token: str | None):
    body = tools_call(text="never", delay_s=60)
    if token is not None:
        body = _with_token(body, token)
    async with mcp_daemon(tmp_path) as daemon:
        async with httpx.AsyncClient(timeout=0.5) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.post(mcp_url(daemon), json=body, headers=HEADERS)
        deadline = time.monotonic() + 10
        while daemon.core.in_flight():
            assert time.monotonic() < deadline, "the call outlived its client"
            await asyncio.sleep(0.05)
