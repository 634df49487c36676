"""A tool of an external MCP server, as a daemon :class:`~exai.tools.base.Tool`.

The daemon's tool contract is a class with a name, a description and an input
model whose JSON schema is listed. A bridged tool's schema belongs to the remote
server, so each one is a small subclass made when the server lists it: its
``_schema`` is the remote ``inputSchema`` (what ``list_tools`` shows) and its
``Input`` accepts any object, leaving validation to the server that defined
the schema. The connection lives in :class:`~exai.bridge.link.ServerLink`, and
results and errors are translated in :mod:`exai.bridge.results`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from mcp import types
from pydantic import BaseModel, ConfigDict

from exai.tools.base import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from exai.bridge.link import ServerLink

__all__ = ["BridgedTool", "RemoteArguments", "make_bridged_tool"]


class RemoteArguments(BaseModel):
    """Any JSON object: the remote server validates against its own schema."""

    model_config = ConfigDict(extra="allow")


class BridgedTool(Tool):
    Input = RemoteArguments
    profile = "lean"  # configured on purpose; EXAI_TOOLS_DENY still removes it
    server: ClassVar[str]
    remote_name: ClassVar[str]
    remote: ClassVar[types.Tool]  # as listed, to notice when the server changes it

    def __init__(self, link: ServerLink) -> None:
        self.link = link

    async def run(self, arguments: RemoteArguments, context: ToolContext) -> ToolResult:
        return await self.link.call(self.remote_name, dict(arguments.model_extra or {}), context)


def make_bridged_tool(link: ServerLink, remote: types.Tool, exposed_name: str) -> BridgedTool:
    schema = dict(remote.input_schema)
    schema.setdefault("type", "object")
    description = (remote.description or remote.title or remote.name).strip()
    attrs: dict[str, Any] = {
        "name": exposed_name,
        "description": f"{description} (from MCP server {link.name!r})",
        "server": link.name,
        "remote_name": remote.name,
        "remote": remote,
        "_schema": schema,
        "__module__": __name__,
    }
    cls = type(f"Bridged_{exposed_name}", (BridgedTool,), attrs)
    return cls(link)
