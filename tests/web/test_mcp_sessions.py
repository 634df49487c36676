"""MCP sessions on /mcp (the 2025-11-25 era): bound to their owner, capped, one GET stream each.

Raw HTTP with httpx, as an attacker would send it: Bob holding Alice's
``Mcp-Session-Id``, one token opening session after session, many GET streams
on one session at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from exai.auth import issue_token
from exai.web import app as web_app
from exai.web.session_book import SessionBook
from tests.web.helpers import SECRET, mcp_daemon, mcp_url

ALICE = issue_token(SECRET, sub="alice", ttl_s=86400)  # minted at import: outlive a slow run
BOB = issue_token(SECRET, sub="bob", ttl_s=86400)
ERA = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "attacker", "version": "1"}}}  # fmt: skip


def _headers(token: str, session_id: str | None = None) -> dict[str, str]:
    out = {**ERA, "Authorization": f"Bearer {token}"}
    if session_id is not None:
        out |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    return out


async def open_session(http: httpx.AsyncClient, url: str, token: str) -> str:
    opened = await http.post(url, json=INIT, headers=_headers(token))
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers=_headers(token, session_id))  # fmt: skip
    assert done.status_code == 202, done.text
    return session_id


async def call_echo(
    http: httpx.AsyncClient, url: str, token: str, session_id: str, text: str
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}  # fmt: skip
    return await http.post(url, json=body, headers=_headers(token, session_id))


def sse_result(response: httpx.Response) -> dict[str, Any]:
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    message: dict[str, Any] = json.loads(data[-1])
    return message


async def test_another_principal_holding_a_session_id_gets_404_for_calls_streams_and_delete(
    tmp_path: Path,
):
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient(timeout=10) as http:
        url = mcp_url(daemon)
        session_id = await open_session(http, url, ALICE)
        bob_call = await call_echo(http, url, BOB, session_id, "bob was here")
        async with http.stream("GET", url, headers=_headers(BOB, session_id)) as bob_stream:
            bob_stream_status = bob_stream.status_code
        bob_delete = await http.delete(url, headers=_headers(BOB, session_id))
        alice_call = await call_echo(http, url, ALICE, session_id, "still mine")
        alice_delete = await http.delete(url, headers=_headers(ALICE, session_id))
    assert (bob_call.status_code, bob_stream_status, bob_delete.status_code) == (404, 404, 404)
    assert bob_call.json()["error"]["message"] == "Session not found"
    assert alice_call.status_code == 200, alice_call.text
    assert sse_result(alice_call)["result"]["content"][0]["text"] == "still mine"
    assert alice_delete.status_code == 200


async def test_a_principal_over_its_session_cap_is_refused_by_name_and_others_are_not(
    tmp_path: Path,
):
    async with (
        mcp_daemon(tmp_path, mcp_max_sessions_per_principal=3) as daemon,
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = mcp_url(daemon)
        mine = [await open_session(http, url, ALICE) for _ in range(3)]
        refused = await http.post(url, json=INIT, headers=_headers(ALICE))
        bobs = await open_session(http, url, BOB)
        await http.delete(url, headers=_headers(ALICE, mine[0]))
        again = await open_session(http, url, ALICE)
        answered = await call_echo(http, url, ALICE, mine[1], "the others still work")
    assert refused.status_code == 429
    message = refused.json()["error"]["message"]
    assert "'alice' has 3 MCP sessions open" in message
    assert "EXAI_MCP_MAX_SESSIONS_PER_PRINCIPAL=3" in message
    assert "mcp-session-id" not in refused.headers
    assert bobs and again not in mine
    assert sse_result(answered)["result"]["content"][0]["text"] == "the others still work"


async def test_concurrent_openings_cannot_step_past_the_cap(tmp_path: Path):
    async with (
        mcp_daemon(tmp_path, mcp_max_sessions_per_principal=5) as daemon,
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = mcp_url(daemon)
        answers = await asyncio.gather(
            *(http.post(url, json=INIT, headers=_headers(ALICE)) for _ in range(40))
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 5 + [429] * 35


async def test_the_daemons_total_cap_is_503_naming_its_setting(tmp_path: Path):
    async with (
        mcp_daemon(tmp_path, mcp_max_sessions=2) as daemon,
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = mcp_url(daemon)
        await open_session(http, url, ALICE)
        await open_session(http, url, BOB)
        refused = await http.post(url, json=INIT, headers=_headers(ALICE))
    assert refused.status_code == 503
    assert "EXAI_MCP_MAX_SESSIONS=2" in refused.json()["error"]["message"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_idle_session_expires_and_frees_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The daemon's book on a hand-turned clock; the SDK ends the session on the same
    # setting by its own timer, which at 30 s does not run out during the test.
    clock = Clock()
    monkeypatch.setattr(web_app, "SessionBook", functools.partial(SessionBook, clock=clock))
    async with (
        mcp_daemon(tmp_path, mcp_max_sessions_per_principal=1, mcp_session_idle_s=30) as daemon,
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = mcp_url(daemon)
        first = await open_session(http, url, ALICE)
        clock.now += 30  # idle exactly as long as it may be: still held
        held = await http.post(url, json=INIT, headers=_headers(ALICE))
        clock.now += 0.5
        second = await open_session(http, url, ALICE)
        book = daemon.web.mcp_sessions
        owners = book.owner(first), book.owner(second)
    assert held.status_code == 429
    assert second != first and owners == (None, "alice")
    assert daemon.web.mcp.session_idle_timeout == 30


async def test_one_standalone_stream_per_session_the_rest_409(tmp_path: Path):
    """100 GETs written at once on 100 connections (an HTTP client's pool opens them one
    by one, which hides the race): one stream, 99 refusals."""
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient(timeout=10) as http:
        url = mcp_url(daemon)
        session_id = await open_session(http, url, ALICE)
        port = daemon.web.port
        lines = "".join(f"{k}: {v}\r\n" for k, v in _headers(ALICE, session_id).items())
        request = f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{lines}\r\n".encode()
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(100)]
        for _, writer in streams:
            writer.write(request)
        heads = await asyncio.gather(*(reader.readuntil(b"\r\n\r\n") for reader, _ in streams))
        statuses = sorted(int(head.split(b" ")[1]) for head in heads)
        for _, writer in streams:
            writer.close()
        # Once the stream's connection is gone, a new stream may open.
        await asyncio.sleep(0.5)
        async with http.stream("GET", url, headers=_headers(ALICE, session_id)) as later:
            later_status = later.status_code
    assert statuses == [200] + [409] * 99
    assert later_status == 200
