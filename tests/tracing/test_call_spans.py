"""A call's spans, end to end: a real daemon, real WebSocket clients, the provider
emulator, and exai's spans caught by an in-memory exporter."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from websockets.asyncio.client import connect

from exai.protocol import ErrorCode
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.tracing.conftest import SECRET

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"


def _settings(tmp_path, emulator, **overrides):
    return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})


async def test_a_chat_call_is_one_trace_with_genai_attributes(
    tmp_path, emulator, spans, client_factory
):
    async with running_daemon(_settings(tmp_path, emulator)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "what is WAL?", "model": "kimi-k2.6"})
    assert res.error is None, res.error

    face = spans.one("call_tool chat")
    assert face.kind is SpanKind.SERVER and face.parent is None
    assert face.attributes["exai.face"] == "websocket"
    trace_id = face.context.trace_id
    assert {s.context.trace_id for s in spans.all} == {trace_id}
    # The result points at its trace.
    assert res.metadata.model_extra["trace_id"] == f"{trace_id:032x}"

    names = {s.name for s in spans.children(face)}
    assert names == {"admission", "execute_tool chat"}
    call = spans.one("execute_tool chat")
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.name"] == "chat"
    assert call.attributes["exai.principal"] == "anonymous"
    assert call.attributes["gen_ai.conversation.id"] == res.metadata.continuation_id
    assert call.attributes["exai.cost.currency"] == res.metadata.cost["currency"]
    assert call.attributes["exai.cost.total"] == pytest.approx(float(res.metadata.cost["total"]))
    assert call.attributes["exai.cache_hit"] is False

    turn = spans.one("turn kimi-k2.6")
    assert turn.parent.span_id == call.context.span_id
    assert {s.name for s in spans.children(call)} == {"turn kimi-k2.6", "audit"}
    steps = {s.name for s in spans.children(turn)}
    assert {"assemble_history", "chat kimi-k2.6", "store_turn"} <= steps

    model = spans.one("chat kimi-k2.6")
    assert model.kind is SpanKind.CLIENT
    a = model.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "moonshot_ai"
    assert a["gen_ai.request.model"] == "kimi-k2.6"
    assert a["gen_ai.response.model"] == res.metadata.model
    assert a["gen_ai.usage.input_tokens"] == res.metadata.usage["prompt_tokens"] > 0
    assert a["gen_ai.usage.output_tokens"] == res.metadata.usage["completion_tokens"] > 0
    assert a["gen_ai.request.stream"] is False
    # Every span of the call ends inside its face's span.
    assert all(face.start_time <= s.start_time and s.end_time <= face.end_time
               for s in spans.all)  # fmt: skip


async def test_every_span_of_a_call_that_succeeds_has_status_ok(
    tmp_path, emulator, spans, client_factory
):
    async with running_daemon(_settings(tmp_path, emulator)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "what is WAL?", "model": "kimi-k2.6"})
        echoed = await client.call("echo", {"text": "hi"})
    assert res.error is None and echoed.error is None
    names = {s.name for s in spans.all}
    assert {"call_tool chat", "execute_tool chat", "chat kimi-k2.6", "call_tool echo"} <= names
    assert {s.name: s.status.status_code for s in spans.all} == dict.fromkeys(names, StatusCode.OK)


async def test_a_streamed_call_records_the_time_to_first_chunk(
    tmp_path, emulator, spans, client_factory
):
    # The emulator waits before its answer begins and after each chunk it sends, so the
    # first chunk comes no sooner than the first wait, and two waits at least follow it
    # (its own, and the last chunk's) before the span ends: bounds the script sets, not
    # the machine's speed.
    before_first, after_each = 0.3, 0.15
    emulator.script({"text": "first and then the rest", "latency_ms": before_first * 1000})
    emulator.configure(chunk_delay_ms=after_each * 1000)
    try:
        async with running_daemon(_settings(tmp_path, emulator)) as daemon:
            client = await client_factory(daemon)
            res = await client.call("chat", {"prompt": "stream it", "model": "glm-4.6"},
                                    stream=True)  # fmt: skip
    finally:
        emulator.reset()
    assert res.error is None, res.error
    model = spans.one("chat glm-4.6")
    assert model.attributes["gen_ai.provider.name"] == "z_ai"
    assert model.attributes["gen_ai.request.stream"] is True
    first_chunk_s = model.attributes["gen_ai.response.time_to_first_chunk"]
    span_s = (model.end_time - model.start_time) / 1e9
    assert before_first <= first_chunk_s <= span_s - 2 * after_each


async def test_a_traceparent_on_the_frame_becomes_the_parent(
    tmp_path, emulator, spans, client_factory
):
    async with running_daemon(_settings(tmp_path, emulator)) as daemon:
        client = await client_factory(daemon)
        trace = {"traceparent": TRACEPARENT, "tracestate": "vendor=1"}
        res = await client.call("echo", {"text": "hi"}, trace=trace)
    assert res.error is None
    face = spans.one("call_tool echo")
    assert f"{face.context.trace_id:032x}" == PARENT_TRACE
    assert f"{face.parent.span_id:016x}" == PARENT_SPAN and face.parent.is_remote
    assert res.metadata.model_extra["trace_id"] == PARENT_TRACE


async def test_an_error_sets_the_status_and_carries_the_exai_code(
    tmp_path, emulator, spans, client_factory
):
    async with running_daemon(_settings(tmp_path, emulator)) as daemon:
        client = await client_factory(daemon)
        missing = await client.call("chat", {"prompt": "x", "continuation_id":
                                             "00000000-0000-4000-8000-000000000000"})  # fmt: skip
        unknown = await client.call("no_such_tool", {})
    assert missing.error.code is ErrorCode.CONVERSATION_NOT_FOUND
    for name in ("execute_tool chat", "call_tool chat"):
        sp = spans.one(name)
        assert sp.status.status_code is StatusCode.ERROR
        assert sp.attributes["error.type"] == "CONVERSATION_NOT_FOUND"
        assert sp.attributes["exai.error.code"] == "CONVERSATION_NOT_FOUND"
    # Refused at admission: the admission span and the face's span say why.
    assert unknown.error.code is ErrorCode.TOOL_NOT_FOUND
    refused = spans.one("call_tool no_such_tool")
    assert refused.attributes["error.type"] == "TOOL_NOT_FOUND"
    assert unknown.metadata.model_extra["trace_id"] == f"{refused.context.trace_id:032x}"
    admission = [s for s in spans.children(refused) if s.name == "admission"]
    assert admission and admission[0].status.status_code is StatusCode.ERROR


async def test_no_prompt_or_completion_text_without_the_setting(
    tmp_path, emulator, spans, client_factory
):
    prompt = "the secret plan is PELICAN-7731"
    async with running_daemon(_settings(tmp_path, emulator)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": prompt, "model": "kimi-k2.6"})
    assert res.error is None
    text = spans.text()
    assert "chat kimi-k2.6" in text  # the spans are there...
    assert "PELICAN-7731" not in text  # ...without the prompt
    assert res.outputs[0].text[:40] not in text  # ...or the answer


async def test_prompt_and_completion_text_when_the_operator_turns_it_on(
    tmp_path, emulator, spans_with_content, client_factory
):
    prompt = f"the secret plan is PELICAN-7731, key {SECRET}"
    async with running_daemon(_settings(tmp_path, emulator, trace_content=True)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": prompt, "model": "kimi-k2.6"})
    assert res.error is None
    model = spans_with_content.one("chat kimi-k2.6")
    sent = json.loads(model.attributes["gen_ai.input.messages"])
    assert sent[-1]["role"] == "user" and "PELICAN-7731" in sent[-1]["parts"][0]["content"]
    answered = json.loads(model.attributes["gen_ai.output.messages"])
    # The emulator's answer repeats the prompt; the credential in it is masked.
    assert answered[0]["parts"][0]["content"] == res.outputs[0].text.replace(SECRET, "****")
    # Credentials are masked even in text the operator asked for.
    assert SECRET not in spans_with_content.text()


async def test_tracing_off_adds_nothing_and_a_bad_traceparent_is_refused(tmp_path, client_factory):
    async with running_daemon(make_settings(tmp_path)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("echo", {"text": "hi"}, trace={"traceparent": TRACEPARENT})
        assert res.error is None and "trace_id" not in (res.metadata.model_extra or {})
        async with connect(daemon.url) as ws:
            await ws.send(json.dumps({"op": "hello"}))
            await ws.recv()
            await ws.send(json.dumps({"op": "call_tool", "request_id": "r1", "name": "echo",
                                      "arguments": {"text": "x"},
                                      "traceparent": "not-a-traceparent"}))  # fmt: skip
            answer = json.loads(await ws.recv())
    assert answer["op"] == "error" and answer["request_id"] == "r1"
    assert answer["error"]["code"] == "INVALID_REQUEST"
    assert "traceparent" in answer["error"]["message"]
