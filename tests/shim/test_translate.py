"""The shim's translation between protocol frames and MCP types, without I/O."""

from __future__ import annotations

import json

import jsonschema
from mcp import types

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
from exai.shim.translate import (
    RESULT_SCHEMA,
    ProgressCounter,
    result_to_mcp,
    tool_to_mcp,
    tools_fingerprint,
)


def test_tool_keeps_name_description_and_schema():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    tool = tool_to_mcp(ToolInfo(name="t", description="d", inputSchema=schema))
    assert (tool.name, tool.description, tool.input_schema) == ("t", "d", schema)


def _result(*texts: str, **metadata: object) -> CallToolResult:
    return CallToolResult(request_id="r", outputs=[TextOutput(text=t) for t in texts],
                          metadata=ResultMetadata(**{"tool": "chat", **metadata}))  # fmt: skip


def _what_models_read(out: types.CallToolResult) -> tuple[str, str]:
    """(content text, structuredContent as JSON): the two things a client may show."""
    return "\n".join(c.text for c in out.content), json.dumps(out.structured_content)


def test_success_carries_the_answer_and_continuation_in_content_and_structured_content():
    out = result_to_mcp(_result("a", "b", model="kimi", latency_ms=3.5, continuation_id="c1"))
    assert not out.is_error
    for text in _what_models_read(out):
        assert "b" in text and "c1" in text and "continuation_id" in text
        assert "To continue this conversation" in text
    assert out.content[0].text == "a" and out.content[1].text.startswith("b\n\n---\n")
    structured = out.structured_content
    assert list(structured)[:2] == ["text", "continuation_id"]
    assert structured["text"] == "a\n\nb" and structured["model"] == "kimi"
    jsonschema.validate(structured, RESULT_SCHEMA)


def test_every_note_a_model_needs_reaches_both_faces():
    out = result_to_mcp(_result(
        "answer", model="glm-4.6", continuation_id="c2", turns_dropped=3, fallback_from="kimi",
        files_skipped=[{"path": "/p/a.bin", "reason": "binary file"}],
        untrusted=True, source="search",
    ))  # fmt: skip
    content, structured = _what_models_read(out)
    for needle in ("3 earlier turn(s)", "instead of kimi", "/p/a.bin (binary file)",
                   "untrusted", "'search'"):  # fmt: skip
        assert needle in content, needle
    assert '"turns_dropped": 3' in structured and "binary file" in structured
    assert '"untrusted": true' in structured


def test_a_workflow_result_says_to_call_the_same_tool_again():
    out = result_to_mcp(_result("{}", tool="codereview", continuation_id="c3",
                                workflow={"status": "in_progress"}))  # fmt: skip
    for text in _what_models_read(out):
        assert 'call codereview again with \\"continuation_id\\": \\"c3\\"' in text or (
            'call codereview again with "continuation_id": "c3"' in text
        )


def test_a_result_without_a_thread_has_no_continuation_notes():
    out = result_to_mcp(_result("pong", tool="echo"))
    assert [c.text for c in out.content] == ["pong"]
    assert out.structured_content == {"text": "pong", "tool": "echo", "latency_ms": 0.0,
                                      "replayed": False}  # fmt: skip
    jsonschema.validate(out.structured_content, RESULT_SCHEMA)


def test_error_is_a_result_with_is_error_code_and_message():
    err = ErrorInfo(code=ErrorCode.RATE_LIMITED, message="slow down", retryable=True,
                    retry_after_s=2.0)  # fmt: skip
    out = result_to_mcp(CallToolResult(request_id="r", error=err,
                                       metadata=ResultMetadata(tool="chat")))  # fmt: skip
    assert out.is_error
    assert out.content[0].text == "RATE_LIMITED: slow down (retryable after 2s)"
    assert out.structured_content["text"] == out.content[0].text
    assert out.structured_content["error"] == {"code": "RATE_LIMITED", "message": "slow down",
                                               "retryable": True, "retry_after_s": 2.0}  # fmt: skip
    jsonschema.validate(out.structured_content, RESULT_SCHEMA)


def test_an_error_inside_a_thread_says_the_thread_is_kept():
    err = ErrorInfo(code=ErrorCode.PROVIDER_ERROR, message="upstream 503", retryable=True)
    out = result_to_mcp(CallToolResult(request_id="r", error=err,
                                       metadata=ResultMetadata(tool="chat",
                                                               continuation_id="c4")))  # fmt: skip
    for text in _what_models_read(out):
        assert "PROVIDER_ERROR" in text and "c4" in text


def test_no_tool_declares_an_output_schema_but_results_follow_the_envelope():
    # 1.x Python clients validate each result against a declared schema at a cost of
    # milliseconds per call; the envelope is documented instead (docs/ide.md).
    tool = tool_to_mcp(ToolInfo(name="t", description="d", inputSchema={"type": "object"}))
    assert tool.output_schema is None
    assert tool.input_schema == {"type": "object"}
    assert RESULT_SCHEMA["required"] == ["text", "tool"]
    metadata = ResultMetadata(tool="t", continuation_id="c")
    out = result_to_mcp(
        CallToolResult(request_id="r", outputs=[TextOutput(text="hi")], metadata=metadata)
    )
    jsonschema.validate(out.structured_content, RESULT_SCHEMA)


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
