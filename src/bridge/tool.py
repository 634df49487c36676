"""A tool of an external MCP server, as a daemon :class:`~exai.tools.base.Tool`.

The daemon's tool contract is a class with a name, a description and an input
model whose JSON schema is listed. A bridged tool's schema belongs to the remote
server, so each one is a small subclass made when the server lists it: its
``_schema`` is the remote ``inputSchema`` (what ``list_tools`` shows) and its
``Input`` accepts any object, leaving validation to the server that defined
the schema. Results and errors are translated here; the connection lives in
:class:`~exai.bridge.link.ServerLink`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from mcp import types
from pydantic import BaseModel, ConfigDict

from exai.errors import ProviderError
from exai.tools.base import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from exai.bridge.link import ServerLink

__all__ = ["BridgedTool", "RemoteArguments", "make_bridged_tool", "to_tool_result"]


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


def to_tool_result(server: str, tool: str, result: types.CallToolResult) -> ToolResult:
    """The remote answer, marked as untrusted output from ``server``.

    A remote ``is_error`` becomes ``PROVIDER_ERROR`` naming the server, so the
    caller can tell an external tool's failure from exai's own.
    """
    texts = [_text_of(block) for block in result.content]
    marks: dict[str, Any] = {"untrusted": True, "source": server, "remote_tool": tool}
    if result.is_error:
        detail = " ".join(t for t in texts if t) or "no details"
        raise ProviderError(f"MCP server {server!r}: tool {tool!r} failed: {detail}",
                            details=marks)  # fmt: skip
    metadata = dict(marks)
    if result.structured_content is not None:
        metadata["structured_content"] = result.structured_content
    return ToolResult(texts or [""], metadata=metadata)


def _text_of(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        # Only text travels in protocol v1; say what was left out rather than drop it.
        return f"[{block.type} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        text = getattr(resource, "text", None)
        return text if isinstance(text, str) else f"[resource {resource.uri}, binary, not shown]"
    if isinstance(block, types.ResourceLink):
        return f"[resource {block.uri}]"
    return json.dumps(block.model_dump(mode="json", exclude_none=True))
