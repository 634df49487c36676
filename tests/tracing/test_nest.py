"""A face's span that becomes its call's span (RecordedSpan.nest, tracing.serve and
exai.daemon.traced.call_span): one object in the process, the same spans out as a
child span would have made, and the face's span failed, ended or kept as before."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from exai import tracing
from exai.daemon import traced
from exai.errors import ValidationError_
from exai.tracing.current import current_span
from exai.tracing.spans import RecordedSpan

FACE_ATTRIBUTES = {"exai.face": "websocket", "exai.request.id": "r1"}
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _session() -> Any:
    return SimpleNamespace(id="s1", principal=SimpleNamespace(name="alice"))


async def _serve(run: Any, traceparent: str | None = None) -> tuple[Any, list[Any]]:
    """A call served as the WebSocket face serves one: ``run(call)`` is its task's body.
    Returns the task and what the body saw as current."""
    loop = asyncio.get_running_loop()
    seen: list[Any] = []

    async def body(call: Any) -> None:
        seen.append(current_span())
        await run(call)

    def submit() -> asyncio.Task[None]:
        traced.admitted(time.time_ns())
        call = SimpleNamespace(request_id="r1", timeout_s=30.0, task=None)
        call.task = loop.create_task(body(call))
        return call.task

    task = tracing.serve("call_tool echo", dict(FACE_ATTRIBUTES), traceparent, None, submit)
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)  # any done callback
    return task, seen


async def test_the_faces_span_becomes_the_calls_span_and_both_are_sent(spans):
    inside: list[Any] = []

    async def run(call: Any) -> None:
        span = traced.call_span(_session(), call, "echo")
        assert span is not None
        inside.append((span.span, current_span(), span.trace_id))
        with tracing.span("turn"):  # a child of the call's span, as any tool makes
            pass
        span.audited(time.time_ns(), None, None)

    _, seen = await _serve(run)
    face, call = spans.one("call_tool echo"), spans.one("execute_tool echo")
    nested, current, trace_id = inside[0]
    assert type(nested) is RecordedSpan and nested is current is seen[0]  # one object
    assert face.kind is SpanKind.SERVER and face.parent is None
    assert call.kind is SpanKind.INTERNAL and call.parent.span_id == face.context.span_id
    assert (
        call.context.trace_id == face.context.trace_id
        and trace_id == f"{face.context.trace_id:032x}"
    )
    assert call.context.span_id != face.context.span_id
    assert nested.get_span_context().span_id == call.context.span_id  # the child's, from nest on
    assert dict(face.attributes) == FACE_ATTRIBUTES
    assert (
        call.attributes["exai.principal"] == "alice"
        and call.attributes["gen_ai.tool.name"] == "echo"
    )
    assert {s.name for s in spans.children(face)} == {"admission", "execute_tool echo"}
    assert {s.name for s in spans.children(call)} == {"turn", "audit"}
    assert face.status.status_code is StatusCode.OK and call.status.status_code is StatusCode.OK
    assert face.start_time <= call.start_time <= call.end_time <= face.end_time
    assert len(spans.all) == 5


async def test_a_call_that_fails_marks_the_faces_span_and_its_own(spans):
    async def run(call: Any) -> None:
        span = traced.call_span(_session(), call, "echo")
        assert span is not None
        span.end(None, ValidationError_("bad arguments"))

    await _serve(run)
    face, call = spans.one("call_tool echo"), spans.one("execute_tool echo")
    for sp in (face, call):
        assert sp.status.status_code is StatusCode.ERROR
        assert sp.attributes["error.type"] == "VALIDATION_ERROR"
    assert call.parent.span_id == face.context.span_id
    assert {s.name for s in spans.children(face)} == {"admission", "execute_tool echo"}


async def test_a_nested_call_whose_audit_step_fails_still_sends_all_four_spans(spans):
    """An audit step that raises is a failed span of its own, and the call's span and
    the face's still end (they used to stay open, never sent)."""

    async def run(call: Any) -> None:
        span = traced.call_span(_session(), call, "echo")
        assert span is not None and span.span is span.parent  # nested
        span.audited(time.time_ns(), None, None, RuntimeError("the ledger broke"))

    await _serve(run)
    face, call = spans.one("call_tool echo"), spans.one("execute_tool echo")
    audit = spans.one("audit")
    assert audit.parent.span_id == call.context.span_id
    assert audit.status.status_code is StatusCode.ERROR
    assert audit.attributes["error.type"] == "RuntimeError"
    assert call.status.status_code is StatusCode.OK and face.status.status_code is StatusCode.OK
    assert call.parent.span_id == face.context.span_id


async def test_the_faces_span_continues_a_traceparent_when_nested(spans):
    async def run(call: Any) -> None:
        span = traced.call_span(_session(), call, "echo")
        assert span is not None
        span.end(None, None)

    await _serve(run, TRACEPARENT)
    face, call = spans.one("call_tool echo"), spans.one("execute_tool echo")
    assert f"{face.context.trace_id:032x}" == TRACEPARENT[3:35]
    assert face.parent.span_id == int(TRACEPARENT[36:52], 16) and face.parent.is_remote
    assert call.parent.span_id == face.context.span_id and not call.parent.is_remote


async def test_a_call_that_never_ran_sends_only_the_faces_span(spans):
    loop = asyncio.get_running_loop()

    async def body() -> None:
        raise AssertionError("never runs")

    def submit() -> asyncio.Task[None]:
        task = loop.create_task(body())
        task.cancel()  # before its first step
        return task

    task = tracing.serve("call_tool echo", dict(FACE_ATTRIBUTES), None, None, submit)
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert [s.name for s in spans.all] == ["call_tool echo"]
    assert spans.one("call_tool echo").status.status_code is StatusCode.OK


async def test_a_call_answered_at_once_ends_the_faces_span_at_once(spans):
    assert tracing.serve("call_tool echo", dict(FACE_ATTRIBUTES), None, None, lambda: None) is None
    assert spans.one("call_tool echo").end_time is not None


async def test_a_faces_span_for_another_task_is_a_parent_not_nested(spans):
    """A face's span that is not waiting for this call's task (another face's way of
    submitting) stays a span of its own, the call's span its child."""
    face = tracing.start("call_tool echo", kind=tracing.SERVER)
    call = SimpleNamespace(request_id="r1", timeout_s=30.0,
                           task=asyncio.get_running_loop().create_future())  # fmt: skip
    with tracing.activate(face):
        span = traced.call_span(_session(), call, "echo")
    assert span is not None and span.span is not face
    span.end(None, None)
    face.end()
    assert (
        spans.one("execute_tool echo").parent.span_id == spans.one("call_tool echo").context.span_id
    )


def test_serve_under_a_current_span_makes_a_child_of_it(spans):
    with tracing.span("outer") as outer:
        assert (
            tracing.serve("call_tool echo", dict(FACE_ATTRIBUTES), None, None, lambda: None) is None
        )
    face = spans.one("call_tool echo")
    assert face.parent.span_id == outer.get_span_context().span_id
    assert face.kind is trace.SpanKind.SERVER


def test_serve_with_tracing_off_only_submits():
    provider = tracing.reset()
    try:
        assert (
            tracing.serve("call_tool echo", {}, TRACEPARENT, None, lambda: "submitted")
            == "submitted"
        )
    finally:
        if provider is not None:
            tracing.install(provider)


def test_a_nested_call_that_ends_well_is_one_call_record_standing_for_four_spans():
    """The common call crosses to the writer as one record (exai.tracing.records.CALL);
    every reader of records makes the same spans of it as of the two records it
    stands for (the shape a failed call still sends)."""
    from opentelemetry.sdk.trace.sampling import DEFAULT_ON

    from exai.tracing.records import CALL, expand, spans_in, standard
    from exai.tracing.spans import Leaf, RecordingTracer, SpanSource

    sent: list[Any] = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, sent.append))
    face = tracer.root_server("call_tool echo", dict(FACE_ATTRIBUTES))
    assert face is not None
    Leaf(face, "admission").end_ok()
    face.nest("execute_tool echo", {"gen_ai.tool.name": "echo"})
    Leaf(face, "audit").end_ok()
    face.end_ok()
    (record,) = sent
    assert record[0] == CALL and spans_in([record]) == 4
    call, outer = standard([record])
    assert call[0] == "execute_tool echo" and call[3] == outer[2]  # its parent: the face's span
    assert [leaf[0] for leaf in call[15]] == ["audit"] and [leaf[0] for leaf in outer[15]] == [
        "admission"
    ]
    assert call[9] == outer[9] == face.end_time and outer[10] == FACE_ATTRIBUTES
    spans = expand([record])
    assert [s[0] for s in spans] == ["audit", "execute_tool echo", "admission", "call_tool echo"]
    assert expand([call, outer]) == spans and spans_in([call, outer]) == 4


def test_a_nested_call_with_an_event_is_sent_as_two_records():
    from opentelemetry.sdk.trace.sampling import DEFAULT_ON

    from exai.tracing.records import spans_in
    from exai.tracing.spans import RecordingTracer, SpanSource

    sent: list[Any] = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, sent.append))
    face = tracer.root_server("call_tool echo", dict(FACE_ATTRIBUTES))
    assert face is not None
    face.nest("execute_tool echo", {"gen_ai.tool.name": "echo"})
    face.add_event("retry")
    face.end_ok()
    assert [r[0] for r in sent] == ["execute_tool echo", "call_tool echo"]
    assert sent[0][11][0][0] == "retry" and spans_in(sent) == 2


async def test_under_a_sampler_that_is_asked_the_steps_and_the_call_are_spans_of_their_own():
    """A sampler exai does not decide for (it must be asked for every span) gets no
    nested span and no leaves: the call's span is a child of the face's, admission
    and audit ordinary spans with the times they were given, a failure marked."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

    from exai.tracing.setup import build_provider

    exporter = InMemorySpanExporter()
    provider = build_provider(exporter, sampler=TraceIdRatioBased(1.0),
                              processor=SimpleSpanProcessor)  # fmt: skip
    tracing.install(provider)
    started: list[int] = []
    try:

        async def run(call: Any) -> None:
            span = traced.call_span(_session(), call, "echo")
            assert span is not None and span.span is not span.parent  # a child, not nested
            started.append(time.time_ns())
            span.audited(started[-1], None, None, ValidationError_("bad"))

        await _serve(run)
    finally:
        tracing.reset()
        provider.shutdown()
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    face, call = by_name["call_tool echo"], by_name["execute_tool echo"]
    assert call.parent.span_id == face.context.span_id != call.context.span_id
    assert by_name["admission"].parent.span_id == face.context.span_id
    audit = by_name["audit"]
    assert audit.parent.span_id == call.context.span_id and audit.start_time == started[0]
    assert audit.status.status_code is StatusCode.ERROR
    assert audit.attributes["error.type"] == "VALIDATION_ERROR"


def test_a_submit_that_raises_ends_the_faces_span_failed(spans):
    """A bug while a call is admitted reaches the face, which answers it; the face's
    span is sent, failed, not left open."""

    def submit() -> Any:
        traced.admitted(time.time_ns(), RuntimeError("a bug"))
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError):
        tracing.serve("call_tool echo", dict(FACE_ATTRIBUTES), None, None, submit)
    face = spans.one("call_tool echo")
    assert face.status.status_code is StatusCode.ERROR
    assert face.attributes["error.type"] == "RuntimeError"
    assert spans.one("admission").parent.span_id == face.context.span_id
    assert current_span() is not face
