"""The MCP stdio shim and the bridge to external MCP servers."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from exai.settings.fields import group

__all__ = ["ShimSettings"]

_shim = group("shim and bridge")


class ShimSettings(BaseModel):
    shim_autostart: bool = _shim(
        False, "exai shim starts a daemon when none listens (one per machine)."
    )
    shim_autostart_timeout_s: float = _shim(
        20.0, "How long the shim waits for the daemon it started.", gt=0
    )
    shim_connect_wait_s: float = _shim(
        10.0, "How long an MCP call waits for the daemon before a clear error.", ge=0
    )
    shim_tools_poll_s: float = _shim(
        30.0, "How often the shim checks the daemon's tools for tools/list_changed.", gt=0
    )
    mcp_servers_file: Path | None = _shim(
        None, "External MCP servers (Claude Desktop format); their tools appear as server__tool."
    )
    bridge_call_timeout_s: float = _shim(
        120.0, "Timeout of a bridged tool call; a server's timeout_s overrides it.", gt=0
    )
    bridge_retry_max_s: float = _shim(60.0, "Longest wait between restarts of a failed server.",
                                      gt=0)  # fmt: skip
    bridge_health_interval_s: float = _shim(15.0, "How often a live server is pinged.", gt=0)
