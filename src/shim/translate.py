"""Between exai's protocol frames and MCP's types, with no I/O.

The shim is a translator; keeping the translation in pure functions means every
mapping (tool listing, results, errors, progress) is tested without a daemon or
an MCP client, and the I/O module stays a thin loop around it.
"""

from __future__ import annotations

from typing import Any

from mcp import types
from pydantic_core import to_json

from exai.protocol import CallToolResult, ErrorInfo, ProgressFrame, StreamChunk, ToolInfo

__all__ = [
    "ProgressCounter",
    "error_to_mcp",
    "result_to_mcp",
    "tool_to_mcp",
    "tools_fingerprint",
]


def tool_to_mcp(tool: ToolInfo) -> types.Tool:
    return types.Tool(name=tool.name, description=tool.description, input_schema=tool.inputSchema)


def tools_fingerprint(tools: list[ToolInfo]) -> tuple[tuple[str, str, str], ...]:
    """What MCP clients cache about the tools; a change means ``tools/list_changed``."""
    return tuple(sorted((t.name, t.description, to_json(t.inputSchema).decode()) for t in tools))


def result_to_mcp(res: CallToolResult) -> types.CallToolResult:
    """A daemon result: outputs become text content, metadata the structured content.

    A daemon error becomes a result with ``is_error`` set (not a JSON-RPC error),
    so the model sees the code and the message and can act on them.
    """
    metadata = res.metadata.model_dump(mode="json", exclude_none=True)
    if res.error is not None:
        return error_to_mcp(res.error, metadata)
    content: list[types.ContentBlock] = [types.TextContent(text=out.text) for out in res.outputs]
    return types.CallToolResult(content=content, structured_content=metadata)


def error_to_mcp(error: ErrorInfo, metadata: dict[str, Any] | None = None) -> types.CallToolResult:
    text = f"{error.code.value}: {error.message}"
    if error.retryable:
        after = f" after {error.retry_after_s:g}s" if error.retry_after_s else ""
        text += f" (retryable{after})"
    structured = dict(metadata or {})
    structured["error"] = error.model_dump(mode="json", exclude_none=True)
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured, is_error=True
    )


class ProgressCounter:
    """Turns daemon ``progress`` and ``stream_chunk`` frames into MCP progress values.

    MCP requires ``progress`` to increase with every notification, while the
    daemon mixes tool progress (``2/3``) with heartbeats that carry none; so the
    value sent is a count of notifications, and a tool's own fraction travels
    in the message.
    """

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def from_frame(self, frame: ProgressFrame | StreamChunk) -> tuple[float, str]:
        self.count += 1
        if isinstance(frame, StreamChunk):
            return float(self.count), frame.text
        message = frame.message
        if frame.progress is not None:
            of = f"/{frame.total:g}" if frame.total is not None else ""
            message = f"{message} ({frame.progress:g}{of})"
        return float(self.count), message
