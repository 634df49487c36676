"""Error text on spans and in the log: the exai code and the vendor's status and code,
never the vendor's message (which may quote the prompt) unless content is on."""

from __future__ import annotations

import json

from opentelemetry.trace import StatusCode

from exai import tracing
from exai.errors import ProviderError
from exai.protocol import ErrorCode
from tests.conftest import LOG_BUFFER, emulated_providers, make_settings, running_daemon

PROMPT = "the secret plan is PELICAN-7731"
VENDOR_SAID = {"status": 400, "body": {"error": {
    "message": f"Invalid request: the message '{PROMPT}' breaks the rules",
    "type": "invalid_request_error"}}}  # fmt: skip


def _settings(tmp_path, emulator, **overrides):
    return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})


async def _failed_chat(tmp_path, emulator, client_factory, **overrides):
    emulator.script(VENDOR_SAID)
    mark = LOG_BUFFER.tell()
    async with running_daemon(_settings(tmp_path, emulator, **overrides)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": PROMPT, "model": "kimi-k2.6"})
    lines = [json.loads(line) for line in LOG_BUFFER.getvalue()[mark:].splitlines() if line]
    return res, [line for line in lines if line.get("event") == "call failed"]


async def test_a_vendor_error_quoting_the_prompt_leaves_it_off_spans_and_the_log(
    tmp_path, emulator, spans, client_factory
):
    res, logged = await _failed_chat(tmp_path, emulator, client_factory)
    assert res.error is not None and res.error.code is ErrorCode.PROVIDER_ERROR
    assert "PELICAN-7731" in res.error.message  # the caller still gets the vendor's words

    assert "PELICAN-7731" not in spans.text()
    for name in ("chat kimi-k2.6", "execute_tool chat", "call_tool chat"):
        sp = spans.one(name)
        assert sp.status.status_code is StatusCode.ERROR
        assert sp.attributes["error.type"] == "PROVIDER_ERROR"
        said = sp.status.description
        assert "PROVIDER_ERROR" in said and "400" in said and "invalid_request_error" in said

    [line] = logged
    assert line["code"] == "PROVIDER_ERROR" and "PELICAN-7731" not in json.dumps(line)
    assert "400" in line["error"] and "invalid_request_error" in line["error"]


async def test_with_content_on_the_vendor_message_is_kept_bounded(
    tmp_path, emulator, spans_with_content, client_factory
):
    res, logged = await _failed_chat(tmp_path, emulator, client_factory, trace_content=True)
    assert res.error is not None
    said = spans_with_content.one("chat kimi-k2.6").status.description
    assert "PELICAN-7731" in said and "PROVIDER_ERROR" in said
    [line] = logged
    assert "PELICAN-7731" in line["error"]


def test_error_text_is_bounded_either_way():
    long = ProviderError("x" * 10_000, details={"provider": "kimi", "status": 400,
                                                "vendor_code": "c" * 10_000})  # fmt: skip
    for content in (False, True):
        text = tracing.describe_error(long, content=content)
        assert text.startswith("PROVIDER_ERROR") and len(text) <= tracing.ERROR_TEXT_MAX


def test_a_bug_is_recorded_by_its_type_and_frames_without_its_message(spans):
    with tracing.span("step") as sp:
        try:
            raise ValueError(f"cannot parse {PROMPT}")
        except ValueError as exc:
            tracing.fail(sp, exc)
    step = spans.one("step")
    assert step.attributes["error.type"] == "ValueError"
    assert step.status.description == "ValueError"
    [event] = step.events
    assert event.name == "exception" and event.attributes["exception.type"] == "ValueError"
    assert "test_a_bug_is_recorded" in event.attributes["exception.stacktrace"]
    assert "PELICAN-7731" not in spans.text()
