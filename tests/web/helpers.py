"""Helpers of the /mcp tests: a daemon with a token, a 2026-07-28 call, its URL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.conftest import make_settings, running_daemon

__all__ = ["MODERN", "SECRET", "TOKEN", "mcp_daemon", "mcp_url", "tools_call"]

TOKEN = "http-test-token"
SECRET = "jwt-secret-for-the-http-tests-0123456789"
MODERN = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo",
          "Accept": "application/json, text/event-stream"}  # fmt: skip


def tools_call(name: str = "echo", **arguments: Any) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
    params = {"name": name, "arguments": arguments or {"text": "hi"}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


@asynccontextmanager
async def mcp_daemon(tmp_path: Path, **overrides: Any) -> AsyncIterator[Any]:
    settings = make_settings(tmp_path, ws_token=TOKEN, jwt_secret=SECRET, **overrides)
    async with running_daemon(settings) as daemon:
        yield daemon


def mcp_url(daemon: Any) -> str:
    return f"http://127.0.0.1:{daemon.web.port}/mcp"
