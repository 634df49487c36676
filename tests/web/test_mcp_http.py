"""MCP over streamable HTTP at /mcp: the official SDK client, and the guard in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from exai.auth import issue_token
from tests.web.helpers import MODERN, SECRET, TOKEN, mcp_daemon, mcp_url, tools_call


@asynccontextmanager
async def _sdk(url: str, token: str, **session_kw: Any) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write, **session_kw) as session,
    ):
        await session.initialize()
        yield session


async def test_the_official_client_lists_and_calls_tools_over_http(tmp_path: Path):
    async with mcp_daemon(tmp_path) as daemon, _sdk(mcp_url(daemon), TOKEN) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert {"chat", "codereview", "echo"} <= set(tools)
        assert tools["echo"].output_schema is None  # see exai.shim.translate.RESULT_SCHEMA
        res = await mcp.call_tool("echo", {"text": "over http"})
        assert not res.is_error and res.content[0].text == "over http"
        assert res.structured_content["text"] == "over http"
        missing = await mcp.call_tool("no_such_tool", {})
        assert missing.is_error and "TOOL_NOT_FOUND" in missing.content[0].text


async def test_a_2026_07_28_post_gets_a_whole_result(tmp_path: Path):
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        auth = {**MODERN, "Authorization": f"Bearer {TOKEN}"}
        answer = await http.post(mcp_url(daemon), json=tools_call(text="one post"), headers=auth)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["content"][0]["text"] == "one post" and not result["isError"]


async def test_no_token_or_a_wrong_one_is_401_with_a_challenge(tmp_path: Path):
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        missing = await http.post(mcp_url(daemon), json=tools_call(), headers=MODERN)
        wrong = await http.post(mcp_url(daemon), json=tools_call(),
                                headers={**MODERN, "Authorization": "Bearer nope"})  # fmt: skip
        basic = await http.post(mcp_url(daemon), json=tools_call(),
                                headers={**MODERN, "Authorization": f"Basic {TOKEN}"})  # fmt: skip
        health = await http.get(f"http://127.0.0.1:{daemon.web.port}/health")
    assert (
        missing.status_code == 401 and missing.headers["www-authenticate"] == 'Bearer realm="exai"'
    )
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert basic.status_code == 401
    assert health.status_code == 200  # liveness stays open, it reveals nothing


async def test_a_jwt_maps_to_its_principal_and_scopes(tmp_path: Path):
    narrow = issue_token(SECRET, sub="alice", scopes=["echo"], ttl_s=600)
    async with mcp_daemon(tmp_path) as daemon, _sdk(mcp_url(daemon), narrow) as mcp:
        allowed = await mcp.call_tool("echo", {"text": "hi"})
        refused = await mcp.call_tool("status", {})
    assert not allowed.is_error
    assert refused.is_error and "FORBIDDEN" in refused.content[0].text
    assert "alice" in refused.content[0].text


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost:1"])
async def test_a_foreign_origin_is_refused(tmp_path: Path, origin: str):
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        answer = await http.post(mcp_url(daemon), json=tools_call(), headers={
            **MODERN, "Authorization": f"Bearer {TOKEN}", "Origin": origin})  # fmt: skip
    assert answer.status_code == 403, answer.text
    assert "origin" in answer.json()["error"]["message"]


async def test_listed_and_own_origins_are_allowed(tmp_path: Path):
    async with (
        mcp_daemon(tmp_path, allowed_origins=["https://app.example.com"]) as daemon,
        httpx.AsyncClient() as http,
    ):
        auth = {**MODERN, "Authorization": f"Bearer {TOKEN}"}
        listed = await http.post(mcp_url(daemon), json=tools_call(),
                                 headers={**auth, "Origin": "https://app.example.com"})  # fmt: skip
        own = await http.post(mcp_url(daemon), json=tools_call(), headers={
            **auth, "Origin": f"http://127.0.0.1:{daemon.web.port}"})  # fmt: skip
    assert listed.status_code == 200 and own.status_code == 200


async def test_dns_rebinding_host_is_refused_on_a_loopback_daemon(tmp_path: Path):
    async with mcp_daemon(tmp_path) as daemon, httpx.AsyncClient() as http:
        answer = await http.post(mcp_url(daemon), json=tools_call(), headers={
            **MODERN, "Authorization": f"Bearer {TOKEN}",
            "Host": f"attacker.example:{daemon.web.port}"})  # fmt: skip
    assert answer.status_code == 403


async def test_failed_logins_over_http_share_the_addresss_allowance(tmp_path: Path):
    """Guessing over HTTP spends the same allowance as over WebSocket, then even the
    right token is refused unchecked from that address."""
    async with (
        mcp_daemon(tmp_path, auth_failures_burst=5, auth_failures_per_min=1) as daemon,
        httpx.AsyncClient() as http,
    ):
        guesses = []
        for i in range(8):
            guess = {**MODERN, "Authorization": f"Bearer guess-{i}"}
            guesses.append(await http.post(mcp_url(daemon), json=tools_call(), headers=guess))
        auth = {**MODERN, "Authorization": f"Bearer {TOKEN}"}
        right = await http.post(mcp_url(daemon), json=tools_call(), headers=auth)
    assert all(g.status_code == 401 for g in guesses)
    assert "too many failed logins" in guesses[-1].json()["error"]["message"]
    assert right.status_code == 401 and "too many failed logins" in right.text


async def test_roots_are_asked_once_per_mcp_session_and_narrow_a_set_ceiling(tmp_path: Path):
    project, other = tmp_path / "project", tmp_path / "other"
    for folder in (project, other):
        folder.mkdir()
        (folder / "main.py").write_text("print('hi')\n")
    asked: list[int] = []

    async def list_roots(context: Any) -> types.ListRootsResult:
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=project.as_uri())])

    def review(path: Path) -> dict[str, Any]:
        return {"step": "look", "step_number": 1, "total_steps": 2, "next_step_required": True,
                "findings": "-", "relevant_files": [str(path)]}  # fmt: skip

    async with (
        mcp_daemon(tmp_path) as daemon,  # allowed_roots is set to tmp_path: a ceiling
        _sdk(mcp_url(daemon), TOKEN, list_roots_callback=list_roots) as mcp,
    ):
        inside = await mcp.call_tool("codereview", review(project / "main.py"))
        again = await mcp.call_tool("codereview", review(project / "main.py"))
        narrowed = await mcp.call_tool("codereview", review(other / "main.py"))
    assert not inside.is_error and not again.is_error, inside.content
    assert narrowed.is_error and "FORBIDDEN" in narrowed.content[0].text
    assert asked == [1]  # one MCP session, one roots/list
