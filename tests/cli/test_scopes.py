"""A scoped token sees the same tools everywhere: ``exai tools``, the stdio shim's and
``/mcp``'s ``tools/list``, each offering only what the token may call."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.cli.helpers import clean_env, run_exai
from tests.shim.helpers import mcp_session

SECRET = "jwt-secret-for-the-cli-scope-tests-0123456789"


async def test_a_scoped_token_lists_only_its_tools_on_every_face(tmp_path: Path, daemon_factory):
    daemon = await daemon_factory(jwt_secret=SECRET)
    env = clean_env(tmp_path, EXAI_JWT_SECRET=SECRET, EXAI_WS_PORT=str(daemon.port),
                    EXAI_HTTP_PORT=str(daemon.web.port))  # fmt: skip
    issued = await run_exai("token", "issue", "--sub", "alice", "--scopes", "chat", "echo",
                            "completion", env=env)  # fmt: skip
    assert issued.code == 0, issued.err
    token = issued.out.strip()

    listed = await run_exai("tools", "--json", "--token", token, env=env)
    cli_tools = {tool["name"] for tool in json.loads(listed.out)}

    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(f"http://127.0.0.1:{daemon.web.port}/mcp", http_client=http) as (
            read,
            write,
            *_,
        ),  # fmt: skip
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        http_tools = {tool.name for tool in (await mcp.list_tools()).tools}

    async with mcp_session({**env, "EXAI_WS_TOKEN": token}, tmp_path) as shim:
        shim_tools = {tool.name for tool in (await shim.list_tools()).tools}

    everything = {info.name for info in daemon.core.tools()}
    assert cli_tools == {"chat", "echo"} <= everything  # completion is callable, not listed
    assert http_tools == cli_tools and shim_tools == cli_tools
    refused = await run_exai("call", "status", "--token", token, env=env)
    assert refused.code == 1 and "FORBIDDEN" in refused.err
