"""A remote MCP tool's answer as a daemon :class:`~exai.tools.base.ToolResult`.

The one translation from MCP's result types to exai's, used by the server link
(:class:`~exai.bridge.link.ServerLink`) for every bridged call: text blocks as
they are, anything else named rather than dropped, a remote error as
``PROVIDER_ERROR``, and the whole marked as untrusted output from its server.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from exai.errors import ProviderError
from exai.tools.base import ToolResult

__all__ = ["to_tool_result"]


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
