"""The frames a call is answered with: its result, its error, a kept result replayed.

Shared by admission (:mod:`exai.daemon.dispatch`: a refusal, a replay) and the
run (:mod:`exai.daemon.run`: a result or the error that stopped the call).
"""

from __future__ import annotations

from exai.errors import ExaiError
from exai.protocol import (
    CallToolResult,
    ErrorInfo,
    ResultMetadata,
    encode_result,
    parse_server_frame,
)
from exai.tools.base import ToolResult

__all__ = ["error_result", "ok_result", "replayed"]


def ok_result(
    rid: str, tool: str, result: ToolResult, latency_ms: float, trace_id: str | None = None
) -> bytes:
    # The daemon's own values win over a tool's.
    if trace_id is not None:
        return encode_result(rid, result.texts, result.metadata, tool=tool,
                             latency_ms=round(latency_ms, 3), trace_id=trace_id)  # fmt: skip
    return encode_result(
        rid, result.texts, result.metadata, tool=tool, latency_ms=round(latency_ms, 3)
    )


def replayed(result: bytes) -> CallToolResult:
    """A kept result, marked as a replay."""
    frame: CallToolResult = parse_server_frame(result)
    meta = frame.metadata.model_copy(update={"replayed": True})
    return frame.model_copy(update={"metadata": meta})


def error_result(
    rid: str, tool: str, exc: ExaiError, latency_ms: float, trace_id: str | None = None
) -> CallToolResult:
    info: ErrorInfo = exc.info()
    extra = {"trace_id": trace_id} if trace_id is not None else {}
    return CallToolResult(
        request_id=rid,
        outputs=[],
        error=info,
        metadata=ResultMetadata(tool=tool, latency_ms=round(latency_ms, 3), **extra),
    )
