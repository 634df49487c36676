"""The tool registry: which tools exist, which are enabled, and their schemas.

Tools are found through the ``exai.tools`` entry-point group, built-ins included,
so a third-party package adds tools by declaring an entry point. An entry point
names either a list of :class:`Tool` instances or a callable taking the settings
and returning one. Dynamic tools (the MCP bridge's) are added and removed at run
time; ``version`` increases on every change so clients can be told. A tool that
is not ``listed`` is enabled and called by name like any other, but left out of
what clients are shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any

from exai.logs import get_logger
from exai.protocol import ToolInfo
from exai.settings import Settings
from exai.tools.base import PROFILE_ORDER, Tool

__all__ = ["ToolRegistry", "discover_tools"]

log = get_logger("exai.tools")


def discover_tools(settings: Settings, group: str = "exai.tools") -> list[Tool]:
    found: list[Tool] = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            obj = ep.load()
            items = obj(settings) if callable(obj) and not isinstance(obj, Tool) else obj
            found.extend(_as_tools(items, ep.name))
        except Exception as exc:  # a broken plugin must not stop the daemon
            log.error("tool plugin failed to load", entry_point=ep.name, error=repr(exc))
    return found


def _as_tools(items: Any, origin: str) -> Iterable[Tool]:
    for item in items:
        if isinstance(item, type) and issubclass(item, Tool):
            item = item()
        if not isinstance(item, Tool):
            raise TypeError(f"{origin}: {item!r} is not a Tool")
        yield item


class ToolRegistry:
    def __init__(self, settings: Settings, tools: Iterable[Tool] = ()) -> None:
        self._settings = settings
        self._tools: dict[str, Tool] = {}
        self._listeners: list[Callable[[], None]] = []
        self._cache: list[ToolInfo] | None = None
        self._enabled: dict[str, Tool] | None = None
        self.version = 0
        for tool in tools:
            self.add(tool, notify=False)

    @classmethod
    def from_entry_points(cls, settings: Settings) -> ToolRegistry:
        return cls(settings, discover_tools(settings))

    def add(self, tool: Tool, *, notify: bool = True) -> None:
        self._tools[tool.name] = tool
        self._changed(notify)

    def remove(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self._changed(True)

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self, notify: bool) -> None:
        self.version += 1
        self._cache = None
        self._enabled = None
        if notify:
            for listener in self._listeners:
                listener()

    def enabled(self, tool: Tool) -> bool:
        s = self._settings
        if tool.always_on:
            return True
        if tool.name == "echo" and not s.enable_echo:
            return False
        if tool.name in s.tools_deny:
            return False
        if tool.name in s.tools_allow:
            return True
        return PROFILE_ORDER[tool.profile] <= PROFILE_ORDER[s.tool_profile]

    def get(self, name: str) -> Tool | None:
        if self._enabled is None:
            self._enabled = {t.name: t for t in self._tools.values() if self.enabled(t)}
        return self._enabled.get(name)

    def names(self) -> list[str]:
        """The tools offered to clients: enabled and listed."""
        return [t.name for t in self._tools.values() if t.listed and self.enabled(t)]

    def infos(self) -> list[ToolInfo]:
        if getattr(self, "_cache", None) is None:
            self._cache = [
                ToolInfo(name=t.name, description=t.description, inputSchema=t.input_schema())
                for t in sorted(self._tools.values(), key=lambda t: t.name)
                if t.listed and self.enabled(t)
            ]
        assert self._cache is not None
        return self._cache
