"""The daemon as an MCP client: external servers' tools in the daemon's registry.

``Bridge`` reads the servers file, keeps one :class:`ServerLink` per server,
and whenever a server (re)lists its tools, recomputes the exposed names of all
bridged tools at once (names depend on the whole set; see ``names``) and
brings the registry in line: new tools added, vanished ones removed, changed
ones replaced. A server that is down keeps its last known tools listed, so a
call to one fails with a clear error naming the server instead of
``TOOL_NOT_FOUND``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from exai.bridge.config import BridgeConfig, load_config
from exai.bridge.link import ServerLink
from exai.bridge.names import assign_names
from exai.bridge.tool import BridgedTool, make_bridged_tool
from exai.logs import get_logger
from exai.settings import Settings
from exai.tools.registry import ToolRegistry

__all__ = ["Bridge"]

log = get_logger("exai.bridge")


class Bridge:
    def __init__(
        self, settings: Settings, registry: ToolRegistry, config: BridgeConfig | None = None
    ) -> None:
        self.settings = settings
        self.registry = registry
        self._config = config
        self.links: dict[str, ServerLink] = {}
        self._exposed: dict[str, BridgedTool] = {}
        self._all_listed = asyncio.Event()

    async def start(self) -> None:
        """Load the servers file and start connecting; returns without waiting for servers.

        Raises :class:`~exai.bridge.config.BridgeConfigError` for a file that
        cannot be used: a broken configuration should stop start-up, not hide.
        """
        config = self._config
        if config is None:
            path = self.settings.mcp_servers_file
            config = load_config(path) if path is not None else BridgeConfig()
        s = self.settings
        for name, server in config.servers.items():
            if server.disabled:
                continue
            self.links[name] = ServerLink(
                name,
                server,
                call_timeout_s=s.bridge_call_timeout_s,
                retry_max_s=s.bridge_retry_max_s,
                health_interval_s=s.bridge_health_interval_s,
                log_dir=s.data_dir / "mcp-servers",
                on_tools=self._tools_listed,
            )
        for link in self.links.values():
            link.start()
        if not self.links:
            self._all_listed.set()
        log.info("bridge started", servers=sorted(self.links))

    async def aclose(self) -> None:
        await asyncio.gather(*(link.aclose() for link in self.links.values()))
        for name in list(self._exposed):
            self.registry.remove(name)
        self._exposed.clear()

    def status(self) -> dict[str, Any]:
        servers = {}
        for name, link in self.links.items():
            entry = link.status()
            entry["tools"] = sorted(t for t, tool in self._exposed.items() if tool.server == name)
            servers[name] = entry
        return {"servers": servers}

    async def wait_until_up(self, timeout_s: float = 30.0) -> None:
        """Wait until every server has listed its tools once (tests and start-up checks)."""
        async with asyncio.timeout(timeout_s):
            await self._all_listed.wait()

    def _tools_listed(self, link: ServerLink) -> None:
        self.sync()
        if all(other.starts for other in self.links.values()):
            self._all_listed.set()

    def sync(self) -> None:
        """Make the registry hold exactly the permitted tools of every server."""
        remote = {
            (link.name, tool.name): (link, tool)
            for link in self.links.values()
            for tool in link.tools
            if link.config.permits(tool.name)
        }
        reserved = set(self.registry.names()) - set(self._exposed)
        names = assign_names(remote, reserved)
        wanted = {names[pair]: pair for pair in remote}
        for name in list(self._exposed):
            if name not in wanted:
                self.registry.remove(name)
                del self._exposed[name]
        for name, pair in sorted(wanted.items()):
            link, tool = remote[pair]
            current = self._exposed.get(name)
            if current is not None and _same(current, link, tool):
                continue
            bridged = make_bridged_tool(link, tool, name)
            self._exposed[name] = bridged
            self.registry.add(bridged)
        log.debug("bridged tools", tools=sorted(self._exposed))


def _same(current: BridgedTool, link: ServerLink, tool: Any) -> bool:
    return current.link is link and current.remote == tool
