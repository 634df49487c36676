"""The OpenAI endpoint's pure parts: which call a request makes, and how answers
and errors are shaped. No daemon, no network."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from exai.protocol import CallToolResult, ErrorCode, ErrorInfo, ResultMetadata, TextOutput
from exai.web.openai_errors import ERRORS, OpenAIRequestError, error_response
from exai.web.openai_request import parse_request
from exai.web.openai_response import ChunkWriter, completion_body, model_list

DOC = Path(__file__).resolve().parents[2] / "docs" / "openai.md"
CID = str(uuid.uuid4())
USER = {"role": "user", "content": "hi"}


def _call(body: dict, **headers: str):
    return parse_request({"model": "k2", **body}, headers)


def _refused(body: dict, **headers: str) -> OpenAIRequestError:
    with pytest.raises(OpenAIRequestError) as caught:
        _call(body, **headers)
    return caught.value


# --- requests -------------------------------------------------------------------


def test_without_a_thread_the_messages_are_passed_whole():
    messages = [{"role": "developer", "content": "be brief"}, USER]
    call = _call({"messages": messages, "temperature": 0.2, "max_tokens": 9, "top_p": 0.5,
                  "seed": 1, "user": None})  # fmt: skip
    assert call.tool == "completion" and call.thread is None
    system = {"role": "system", "content": "be brief"}
    assert call.arguments == {"model": "k2", "temperature": 0.2, "max_tokens": 9,
                              "messages": [system, USER]}  # fmt: skip
    assert call.ignored == ("seed", "top_p")  # a null field is not a setting


def test_a_new_thread_takes_the_last_user_message_and_the_system_prompt():
    call = _call({"metadata": {"exai_thread": "new"}, "max_tokens": 5, "messages": [
        {"role": "system", "content": "Be a pirate."},
        {"role": "user", "content": "old"}, {"role": "assistant", "content": "older"},
        {"role": "user", "content": [{"type": "text", "text": "new"},
                                     {"type": "text", "text": "line"}]},
    ]})  # fmt: skip
    assert call.tool == "chat" and call.thread == "new"
    assert call.arguments == {"model": "k2", "prompt": "new\nline", "system_prompt": "Be a pirate."}
    assert call.messages_ignored == 2 and call.ignored == ("max_tokens",)


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
        ({"messages": [USER], "tools": [{"type": "function"}]}, {}, "tools"),
        ({"messages": [USER], "tool_choice": "required"}, {}, "tool_choice"),
        ({"messages": [USER], "response_format": {"type": "json_object"}}, {},
         "response_format"),
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
    status, payload, _ = error.response()
    assert status == 400 and payload["error"]["param"] == param and payload["error"]["message"]


def test_usage_is_included_only_in_a_stream_that_asks():
    options = {"stream_options": {"include_usage": True}, "messages": [USER]}
    assert _call({**options, "stream": True}).include_usage is True
    assert _call(options).include_usage is False


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
        (ErrorInfo(code=ErrorCode.PROVIDER_ERROR, message="bad key"), 502, "provider_error"),
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


def _result(**metadata) -> CallToolResult:
    meta = ResultMetadata(tool="chat", model="kimi-k2.6", provider="kimi",
                          continuation_id=CID, **metadata)  # fmt: skip
    return CallToolResult(request_id="r1", outputs=[TextOutput(text="answer")], metadata=meta)


def test_a_completion_carries_the_answer_usage_and_exai_fields():
    call = _call({"messages": [USER], "metadata": {"exai_thread": "new"}, "top_p": 1})
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
                            "provider": "kimi", "ignored": ["top_p"], "cost": None}  # fmt: skip


def test_a_stream_with_usage_ends_with_a_usage_chunk_without_choices():
    call = _call({"messages": [USER], "stream": True, "stream_options": {"include_usage": True}})
    writer = ChunkWriter(call, completion_id="chatcmpl-1", created=7)
    first, text = writer.first(), writer.text("ans")
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
