"""The shim's translation between protocol frames and MCP types, without I/O."""

from __future__ import annotations

from exai.protocol import (
    CallToolResult,
    ErrorCode,
    ErrorInfo,
    ProgressFrame,
    ResultMetadata,
    StreamChunk,
    TextOutput,
    ToolInfo,
)
from exai.shim.translate import ProgressCounter, result_to_mcp, tool_to_mcp, tools_fingerprint


def test_tool_keeps_name_description_and_schema():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    tool = tool_to_mcp(ToolInfo(name="t", description="d", inputSchema=schema))
    assert (tool.name, tool.description, tool.input_schema) == ("t", "d", schema)


def test_success_maps_outputs_to_text_and_metadata_to_structured_content():
    res = CallToolResult(request_id="r", outputs=[TextOutput(text="a"), TextOutput(text="b")],
                         metadata=ResultMetadata(tool="chat", model="kimi", latency_ms=3.5,
                                                 continuation_id="c1"))  # fmt: skip
    out = result_to_mcp(res)
    assert not out.is_error and [c.text for c in out.content] == ["a", "b"]
    assert out.structured_content == {"tool": "chat", "model": "kimi", "latency_ms": 3.5,
                                      "continuation_id": "c1", "replayed": False}  # fmt: skip


def test_error_is_a_result_with_is_error_code_and_message():
    err = ErrorInfo(code=ErrorCode.RATE_LIMITED, message="slow down", retryable=True,
                    retry_after_s=2.0)  # fmt: skip
    out = result_to_mcp(CallToolResult(request_id="r", error=err,
                                       metadata=ResultMetadata(tool="chat")))  # fmt: skip
    assert out.is_error
    assert out.content[0].text == "RATE_LIMITED: slow down (retryable after 2s)"
    assert out.structured_content["error"] == {"code": "RATE_LIMITED", "message": "slow down",
                                               "retryable": True, "retry_after_s": 2.0}  # fmt: skip


def test_progress_strictly_increases_and_keeps_the_tools_fraction():
    counter = ProgressCounter()
    frames = [ProgressFrame(request_id="r", message="step", progress=2, total=3),
              ProgressFrame(request_id="r", message="chat running (10s)"),
              StreamChunk(request_id="r", seq=0, text="Hel")]  # fmt: skip
    out = [counter.from_frame(f) for f in frames]
    assert out == [(1.0, "step (2/3)"), (2.0, "chat running (10s)"), (3.0, "Hel")]


def test_fingerprint_ignores_order_but_not_schema_changes():
    a = ToolInfo(name="a", description="", inputSchema={"type": "object"})
    b = ToolInfo(name="b", description="", inputSchema={"type": "object"})
    b2 = ToolInfo(name="b", description="", inputSchema={"type": "object", "required": ["x"]})
    assert tools_fingerprint([a, b]) == tools_fingerprint([b, a])
    assert tools_fingerprint([a, b]) != tools_fingerprint([a, b2])
