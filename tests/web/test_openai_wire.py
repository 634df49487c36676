"""The OpenAI endpoint's pure parts: which call a request makes, and how answers
and errors are shaped. No daemon, no network."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from exai.protocol import (
    CallToolResult,
    ErrorCode,
    ErrorInfo,
    ModelAnswer,
    ResultMetadata,
    StreamEvent,
    TextOutput,
)
from exai.web.model_call import RequestRefused
from exai.web.openai_errors import ERRORS, error_response, refusal_response
from exai.web.openai_request import parse_request
from exai.web.openai_response import ChunkWriter, completion_body, model_list

DOC = Path(__file__).resolve().parents[2] / "docs" / "openai.md"
CID = str(uuid.uuid4())
USER = {"role": "user", "content": "hi"}


def _call(body: dict, **headers: str):
    return parse_request({"model": "k2", **body}, headers)


def _refused(body: dict, **headers: str) -> RequestRefused:
    with pytest.raises(RequestRefused) as caught:
        _call(body, **headers)
    return caught.value


# --- requests -------------------------------------------------------------------


def test_without_a_thread_the_messages_and_every_parameter_are_passed():
    messages = [{"role": "developer", "content": "be brief"}, USER]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    call = _call({"messages": messages, "temperature": 0.2, "max_tokens": 9, "top_p": 0.5,
                  "seed": 1, "user": None, "stop": ["\n"], "tools": tools,
                  "tool_choice": "required", "parallel_tool_calls": False,
                  "response_format": {"type": "json_object"}})  # fmt: skip
    assert call.tool == "completion" and call.thread is None
    system = {"role": "system", "content": "be brief"}
    assert call.arguments == {"model": "k2", "temperature": 0.2, "max_tokens": 9,
                              "messages": [system, USER], "top_p": 0.5, "seed": 1,
                              "stop": ["\n"], "tools": tools, "tool_choice": "required",
                              "parallel_tool_calls": False,
                              "response_format": {"type": "json_object"}}  # fmt: skip
    assert call.notes == ()


def test_legacy_functions_become_tools_and_their_history_tool_messages():
    messages = [USER, {"role": "assistant", "content": None,
                       "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "42"}]  # fmt: skip
    call = _call({"messages": messages, "functions": [{"name": "f", "parameters": {}}],
                  "function_call": {"name": "f"}})  # fmt: skip
    assert call.legacy
    assert call.arguments["tools"] == [{"type": "function",
                                        "function": {"name": "f", "parameters": {}}}]  # fmt: skip
    assert call.arguments["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert call.arguments["parallel_tool_calls"] is False
    sent = call.arguments["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "call_fn_1" and "function_call" not in sent[1]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_fn_1", "content": "42"}


def test_user_and_reasoning_fields_are_applied():
    call = _call({"messages": [USER], "user": "u-7", "reasoning_effort": "minimal"})
    assert call.client_ref == "u-7" and call.arguments["reasoning_effort"] == "minimal"
    # The level reaches the core as it is: the core knows each model's knob, and notes it.
    on = _call({"messages": [USER], "reasoning_effort": "xhigh"})
    assert on.arguments["reasoning_effort"] == "xhigh" and "thinking_mode" not in on.arguments
    assert on.notes == ()
    switch = _call({"messages": [USER], "thinking": {"type": "disabled"}})
    assert switch.arguments["thinking_mode"] == "off" and switch.notes == ()


def test_a_new_thread_takes_the_last_user_message_and_the_system_prompt():
    call = _call({"metadata": {"exai_thread": "new"}, "messages": [
        {"role": "system", "content": "Be a pirate."},
        {"role": "user", "content": "old"}, {"role": "assistant", "content": "older"},
        {"role": "user", "content": [{"type": "text", "text": "new"},
                                     {"type": "text", "text": "line"}]},
    ]})  # fmt: skip
    assert call.tool == "chat" and call.thread == "new"
    assert call.arguments == {"model": "k2", "prompt": "new\nline", "system_prompt": "Be a pirate."}
    assert call.messages_ignored == 2


def test_a_thread_is_continued_from_the_header_or_the_metadata():
    by_header = _call({"messages": [USER]}, **{"x-exai-thread": CID})
    by_metadata = _call({"messages": [USER], "metadata": {"exai_thread": CID}})
    for call in (by_header, by_metadata):
        assert call.arguments == {"model": "k2", "prompt": "hi", "continuation_id": CID}
    same = _call({"messages": [USER], "metadata": {"exai_thread": CID}}, **{"x-exai-thread": CID})
    assert same.thread == CID


@pytest.mark.parametrize(
    ("body", "headers", "param"),
    [
        ({"messages": []}, {}, "messages"),
        ({"messages": ["hi"]}, {}, "messages[0]"),
        ({"messages": [USER], "n": 3}, {}, "n"),
        ({"messages": [USER], "logprobs": True}, {}, "logprobs"),
        ({"messages": [USER], "presence_penalty": 1}, {}, "presence_penalty"),
        ({"messages": [USER], "some_new_field": 1}, {}, "some_new_field"),
        ({"messages": [USER], "store": True}, {}, "store"),
        ({"messages": [USER], "modalities": ["text", "audio"]}, {}, "modalities"),
        ({"messages": [USER], "stream_options": {"include_usage": True}}, {}, "stream_options"),
        ({"messages": [USER], "stream": True, "stream_options": {"x": 1}}, {},
         "stream_options.x"),
        ({"messages": [USER], "metadata": {"team": "a"}}, {}, "metadata.team"),
        ({"messages": [USER], "reasoning_effort": "extreme"}, {}, "reasoning_effort"),
        ({"messages": [USER], "tools": [], "functions": []}, {}, "functions"),
        ({"messages": [USER], "function_call": {"name": "f", "x": 1}, "functions": []}, {},
         "function_call"),
        ({"messages": [USER, {"role": "function", "content": "x"}]}, {}, "messages[1]"),
        ({"messages": [USER], "metadata": {"exai_thread": "new"}, "max_tokens": 5}, {},
         "max_tokens"),
        ({"messages": [USER], "metadata": {"exai_thread": "new"}, "tools": []}, {}, "tools"),
        ({"messages": [USER], "metadata": {"exai_thread": "new"}, "stop": "x"}, {}, "stop"),
        ({"messages": [USER], "stream": "yes"}, {}, "stream"),
        ({"messages": [USER], "temperature": "hot"}, {}, "temperature"),
        ({"messages": [USER], "metadata": {"exai_thread": "42"}}, {}, "metadata.exai_thread"),
        ({"messages": [USER]}, {"x-exai-thread": "latest"}, "X-Exai-Thread"),
        ({"messages": [USER], "metadata": {"exai_thread": "new"}}, {"x-exai-thread": CID},
         "metadata.exai_thread"),
        ({"messages": [USER, {"role": "assistant", "content": "x"}],
          "metadata": {"exai_thread": "new"}}, {}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
          "metadata": {"exai_thread": "new"}}, {}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "  "}], "metadata": {"exai_thread": "new"}},
         {}, "messages[0].content"),
    ],
)  # fmt: skip
def test_requests_that_cannot_be_served_name_the_field_at_fault(body, headers, param):
    error = _refused(body, **headers)
    status, payload, _ = refusal_response(error)
    assert status == 400 and payload["error"]["param"] == param and payload["error"]["message"]


def test_usage_is_included_only_in_a_stream_that_asks():
    options = {"stream_options": {"include_usage": True}, "messages": [USER]}
    assert _call({**options, "stream": True}).include_usage is True
    assert _call({"messages": [USER], "stream": True}).include_usage is False


# --- errors ---------------------------------------------------------------------


def test_every_exai_error_code_has_an_openai_shape_and_is_documented_so():
    assert set(ERRORS) == set(ErrorCode)
    rows = [line for line in DOC.read_text().splitlines() if re.match(r"^\| \d{3} \|", line)]
    for code, shape in ERRORS.items():
        statuses = {int(row.split("|")[1]) for row in rows if f"`{code.value}`" in row}
        expected = {shape.status, shape.status_if_retryable} - {None}
        assert statuses == expected, f"docs/openai.md: {code.value} is {statuses}, not {expected}"


@pytest.mark.parametrize(
    ("info", "status", "code"),
    [
        (ErrorInfo(code=ErrorCode.VALIDATION_ERROR, message="unknown model 'x'",
                   details={"known_models": ["k2"]}), 404, "model_not_found"),
        (ErrorInfo(code=ErrorCode.PROVIDER_ERROR, message="bad key"), 424, "provider_error"),
        (ErrorInfo(code=ErrorCode.PROVIDER_ERROR, message="down", retryable=True), 503,
         "provider_error"),
        (ErrorInfo(code=ErrorCode.CONTEXT_TOO_LONG, message="long"), 400,
         "context_length_exceeded"),
        (ErrorInfo(code=ErrorCode.TIMEOUT, message="slow", retryable=True), 504, "timeout"),
        (ErrorInfo(code=ErrorCode.FORBIDDEN, message="no"), 403, "forbidden"),
    ],
)  # fmt: skip
def test_errors_map_to_statuses_and_codes(info, status, code):
    got_status, body, headers = error_response(info)
    assert got_status == status and body["error"]["code"] == code
    assert body["error"]["exai"]["code"] == info.code.value
    assert headers["x-should-retry"] == ("true" if info.retryable else "false")


def test_a_rate_limit_says_when_to_retry():
    info = ErrorInfo(code=ErrorCode.RATE_LIMITED, message="slow down", retryable=True,
                     retry_after_s=1.2)  # fmt: skip
    status, body, headers = error_response(info)
    assert status == 429 and body["error"]["type"] == "rate_limit_error"
    assert headers["retry-after"] == "2" and headers["retry-after-ms"] == "1200"


@pytest.mark.parametrize(
    ("field", "param"), [("messages.2.role", "messages[2].role"), ("prompt", "messages"),
                         ("temperature", "temperature"), ("(arguments)", None)],
)  # fmt: skip
def test_a_tool_validation_error_names_the_openai_field(field, param):
    details = {"fields": [{"field": field, "problem": "wrong"}]}
    info = ErrorInfo(code=ErrorCode.VALIDATION_ERROR, message="bad", details=details)
    assert error_response(info)[1]["error"]["param"] == param


# --- answers --------------------------------------------------------------------


def _result(usage=None, **answer) -> CallToolResult:
    """A result whose metadata carries ``answer``: fields of the declared ModelAnswer,
    so a field it does not declare fails here."""
    meta = ResultMetadata(tool="chat", model="kimi-k2.6", provider="kimi", continuation_id=CID,
                          usage=usage, **ModelAnswer(**answer).fields())  # fmt: skip
    return CallToolResult(request_id="r1", outputs=[TextOutput(text="answer")], metadata=meta)


def test_a_completion_carries_the_answer_usage_and_exai_fields():
    call = _call({"messages": [USER], "metadata": {"exai_thread": "new"}})
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "reasoning_tokens": 2,
             "cached_prompt_tokens": 1}  # fmt: skip
    body = completion_body(call, _result(usage=usage, reasoning="hmm"), "answer",
                           completion_id="chatcmpl-1", created=7)  # fmt: skip
    message = {"role": "assistant", "content": "answer", "refusal": None,
               "reasoning_content": "hmm"}  # fmt: skip
    assert body["choices"][0]["message"] == message
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                             "prompt_tokens_details": {"cached_tokens": 1},
                             "completion_tokens_details": {"reasoning_tokens": 2}}  # fmt: skip
    assert body["exai"] == {"request_id": "r1", "tool": "chat", "continuation_id": CID,
                            "thread_started": True, "model": "kimi-k2.6",
                            "provider": "kimi", "cost": None}  # fmt: skip


def test_a_stream_with_usage_ends_with_a_usage_chunk_without_choices():
    call = _call({"messages": [USER], "stream": True, "stream_options": {"include_usage": True}})
    writer = ChunkWriter(call, completion_id="chatcmpl-1", created=7)
    first, text = writer.first(), writer.chunk(StreamEvent("text", "ans"))
    end, usage = writer.last(_result(usage={"prompt_tokens": 1, "completion_tokens": 1}))
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert text["choices"][0]["delta"] == {"content": "ans"} and text["usage"] is None
    assert first["model"] == "k2" and end["model"] == "kimi-k2.6"
    assert end["choices"][0]["finish_reason"] == "stop" and "exai" in end
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 2


def test_the_model_list_has_auto_then_configured_models_then_aliases():
    models = [
        {"name": "k2-big", "provider": "kimi", "configured": True, "aliases": ["k2"],
         "context_window": 10},
        {"name": "glm-x", "provider": "glm", "configured": False, "aliases": []},
    ]  # fmt: skip
    listing = model_list(models, "k2-big")
    assert [m["id"] for m in listing["data"]] == ["auto", "k2-big", "k2"]
    assert listing["data"][0]["exai"] == {"auto": True, "routes_to": "k2-big"}
    assert listing["data"][2]["exai"] == {"alias_of": "k2-big"}


def test_tool_calls_come_back_in_openais_shape_whole_and_streamed():
    calls = [{"id": "functions.f:0", "type": "function",
              "function": {"name": "f", "arguments": '{"a": 1}'}}]  # fmt: skip
    result = _result(finish_reason="tool_calls", tool_calls=calls,
                     notes=[{"param": "thinking", "message": "off"}])  # fmt: skip
    call = _call({"messages": [USER], "stream": True,
                  "tools": [{"type": "function", "function": {"name": "f"}}]})  # fmt: skip
    body = completion_body(call, result, "", completion_id="c", created=1)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["tool_calls"] == calls
    assert choice["message"]["content"] is None
    assert body["exai"]["notes"] == [{"param": "thinking", "message": "off"}]
    writer = ChunkWriter(call, completion_id="c", created=1)
    head = writer.chunk(StreamEvent("tool_call", index=0, tool_call={**calls[0], "function": {
        "name": "f", "arguments": ""}}))  # fmt: skip
    piece = writer.chunk(StreamEvent("tool_arguments", '{"a"', 0))
    assert head["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "id": "functions.f:0", "type": "function",
         "function": {"name": "f", "arguments": ""}}]  # fmt: skip
    assert piece["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "function": {"arguments": '{"a"'}}]  # fmt: skip
    assert writer.last(result)[0]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_legacy_request_is_answered_with_function_call():
    calls = [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    call = _call({"messages": [USER], "functions": [{"name": "f"}]})
    body = completion_body(call, _result(finish_reason="tool_calls", tool_calls=calls), "",
                           completion_id="c", created=1)  # fmt: skip
    message = body["choices"][0]["message"]
    assert message["function_call"] == {"name": "f", "arguments": "{}"}
    assert "tool_calls" not in message and body["choices"][0]["finish_reason"] == "function_call"
