"""End to end: an MCP client, through ``exai shim``, calls a tool of an external MCP
server that the daemon bridges, and is told when bridged tools appear."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from mcp import types

from exai.bridge import Bridge
from tests.bridge.conftest import stdio_server_entry
from tests.conftest import make_settings, running_daemon
from tests.shim.helpers import mcp_session, shim_env


async def test_bridged_tools_appear_through_the_shim_and_are_callable(tmp_path: Path):
    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"fixture": stdio_server_entry()}}))
    # The daemon starts without the servers file; the bridge joins mid-session
    # so that the shim has a tool-list change to notice.
    settings = make_settings(tmp_path, mcp_servers_file=config)
    async with running_daemon(make_settings(tmp_path)) as daemon:
        env = shim_env(None, EXAI_WS_PORT=str(daemon.port), EXAI_SHIM_TOOLS_POLL_S="0.2",
                       EXAI_DATA_DIR=str(tmp_path / "shim-data"))  # fmt: skip
        async with mcp_session(env, tmp_path, message_handler=on_message) as mcp:
            assert "fixture__add" not in {t.name for t in (await mcp.list_tools()).tools}
            bridge = Bridge(settings, daemon.core.registry)
            await bridge.start()
            try:
                await asyncio.wait_for(changed.wait(), 30)  # the shim's poll noticed
                listed = {t.name: t for t in (await mcp.list_tools()).tools}
                assert listed["fixture__add"].input_schema["required"] == ["a", "b"]
                res = await mcp.call_tool("fixture__add", {"a": 20, "b": 22})
                assert not res.is_error and res.content[0].text.startswith("42\n")
                # Both faces say where the answer came from, for the calling model to weigh.
                assert "external MCP server 'fixture'" in res.content[0].text
                assert res.structured_content["text"] == "42"
                assert res.structured_content["untrusted"] is True
                assert res.structured_content["source"] == "fixture"
            finally:
                await bridge.aclose()
