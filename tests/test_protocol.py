"""The protocol module: parsing, serialization and generated schemas."""

from __future__ import annotations

import json

import pytest

from exai import protocol as p
from exai.protocol import CallToolResult, dump_frame_bytes, encode_result


def test_every_op_has_a_generated_schema():
    schemas = p.frame_schemas()
    assert set(schemas) == {"hello", "list_tools", "call_tool", "cancel", "ping", "hello_ack",
                            "list_tools_res", "call_tool_ack", "progress", "stream_chunk",
                            "call_tool_res", "pong", "error"}  # fmt: skip
    assert "request_id" in schemas["call_tool"]["required"]


def test_docs_schemas_match_the_models():
    """docs/protocol.schema.json is generated; a stale copy fails here."""
    from pathlib import Path

    path = Path(__file__).parent.parent / "docs" / "protocol.schema.json"
    assert json.loads(path.read_text()) == p.frame_schemas()


def test_call_tool_res_always_has_error_key():
    res = p.CallToolResult(request_id="1", outputs=[p.TextOutput(text="hi")],
                           metadata=p.ResultMetadata(tool="echo"))  # fmt: skip
    data = json.loads(p.dump_frame(res))
    assert data["error"] is None and data["op"] == "call_tool_res"
    assert p.parse_server_frame(p.dump_frame(res)) == res


def test_optional_fields_are_left_out_of_other_frames():
    assert json.loads(p.dump_frame(p.PongFrame())) == {"op": "pong"}


def test_unknown_fields_are_ignored_for_forward_compatibility():
    frame = p.parse_client_frame('{"op":"ping","request_id":"1","future_field":true}')
    assert isinstance(frame, p.PingFrame)


@pytest.mark.parametrize("sid", ["ab", "x" * 65, "has space", "semi;colon"])
def test_hello_rejects_bad_session_ids(sid):
    with pytest.raises(p.FrameError):
        p.parse_client_frame(json.dumps({"op": "hello", "session_id": sid}))


def test_request_id_is_recovered_for_error_frames():
    with pytest.raises(p.FrameError) as info:
        p.parse_client_frame('{"op":"call_tool","request_id":"r9","name":5}')
    assert info.value.request_id == "r9"
    assert info.value.to_frame().error.code == p.ErrorCode.INVALID_REQUEST


def test_deep_nesting_is_a_frame_error():
    with pytest.raises(p.FrameError) as info:
        p.parse_client_frame("[" * 10000 + "]" * 10000)
    assert info.value.not_json


def test_encoded_results_are_the_bytes_the_model_serializes_to():
    cases = [
        ("r1", ["one"], {"tool": "echo", "latency_ms": 0.5}),
        ("r2", ["a", "b"], {"tool": "chat", "latency_ms": 12.0, "model": "glm-4.6",
                            "provider": "glm", "usage": {"input_tokens": 3},
                            "files_skipped": [{"path": "/x", "reason": "missing"}]}),
        ("r3", [], {"tool": "version", "latency_ms": 0.0, "replayed": False}),
    ]  # fmt: skip
    for rid, texts, meta in cases:
        model = CallToolResult.model_validate(
            {"request_id": rid, "outputs": [{"text": t} for t in texts], "metadata": meta}
        )
        assert encode_result(rid, texts, meta) == dump_frame_bytes(model)


def test_encoding_refuses_what_the_model_would_refuse():
    with pytest.raises(TypeError):
        encode_result("r", [42], {"tool": "echo"})  # type: ignore[list-item]
    with pytest.raises(ValueError):
        encode_result("r", ["x"], {"tool": "echo", "handle": object()})


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "1e999999"])
def test_a_number_json_cannot_carry_is_a_frame_error_naming_the_call(number):
    frame = ('{"op": "call_tool", "request_id": "r7", "name": "completion", '
             f'"arguments": {{"messages": [], "top_p": {number}}}}}')  # fmt: skip
    with pytest.raises(p.FrameError) as caught:
        p.parse_client_frame(frame)
    assert caught.value.request_id == "r7" and "NaN, Infinity" in str(caught.value)
    # The same words in text are text.
    text = (
        '{"op": "call_tool", "request_id": "r8", "name": "echo", "arguments": {"t": "NaN 1e999"}}'
    )
    assert p.parse_client_frame(text).arguments == {"t": "NaN 1e999"}


# --- what a result tells beside its text ---------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}


def test_a_declared_answer_goes_over_the_wire_as_plain_metadata_keys_and_comes_back():
    note = {"param": "thinking", "message": "off"}
    answer = p.ModelAnswer(finish_reason="tool_calls", tool_calls=[CALL], notes=[note],
                           reasoning="hm")  # fmt: skip
    fields = answer.fields()
    # Only what is set, in the order declared, each as the JSON a client reads by name.
    assert fields == {"finish_reason": "tool_calls", "tool_calls": [CALL], "notes": [note],
                      "reasoning": "hm"}  # fmt: skip
    raw = encode_result("r1", ["x"], {"tool": "completion", **fields})
    assert json.loads(raw)["metadata"]["tool_calls"] == [CALL]
    result = p.parse_server_frame(raw)
    assert raw == dump_frame_bytes(result)  # the declared keys stay the metadata's own
    assert p.ModelAnswer.of(result.metadata) == answer
    # Another tool's keys and the daemon's are not the answer's.
    other = p.ResultMetadata(tool="chat", files_included=["a"], trace_id="0" * 32)
    assert p.ModelAnswer.of(other) == p.ModelAnswer(trace_id="0" * 32)
    assert p.ModelAnswer().fields() == {}


def test_a_key_the_contract_does_not_declare_is_refused_where_the_answer_is_built():
    with pytest.raises(ValueError, match="finsh_reason"):
        p.ModelAnswer(finsh_reason="stop")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="tool_calls"):
        p.ModelAnswer(tool_calls=[{"id": "call_1"}])  # type: ignore[list-item]
    assert p.MemoryAnswer(memories=[]).fields() == {"memories": []}  # empty, but said
