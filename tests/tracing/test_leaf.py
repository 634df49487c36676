"""Leaf spans: children of exai's spans sent in their parent's record, exported as
spans of their own with the same ids, times, status and parent as any span."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags

from exai import tracing
from exai.errors import ValidationError_
from exai.tracing.current import current_span
from exai.tracing.records import expand, spans_in
from exai.tracing.spans import Leaf, RecordingTracer, SpanSource


def test_a_leaf_is_a_child_of_the_current_span_which_stays_current(spans):
    with tracing.span("parent") as parent:
        with tracing.leaf("step"):
            assert current_span() is parent
        assert spans.named("step") == []  # sent with its parent
    step, outer = spans.one("step"), spans.one("parent")
    assert step.parent.span_id == outer.context.span_id
    assert step.context.trace_id == outer.context.trace_id
    assert step.context.span_id != outer.context.span_id
    assert step.status.status_code is StatusCode.OK
    assert step.kind is trace.SpanKind.INTERNAL
    assert outer.start_time <= step.start_time <= step.end_time <= outer.end_time


def test_a_leaf_that_fails_is_a_failed_span_with_exais_error_code(spans):
    with tracing.span("parent"):
        with pytest.raises(ValidationError_), tracing.leaf("admission"):
            raise ValidationError_("bad arguments")
    failed = spans.one("admission")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "VALIDATION_ERROR"
    assert failed.parent.span_id == spans.one("parent").context.span_id


def test_a_cancelled_leaf_is_recorded_as_cancelled(spans):
    async def main():
        with tracing.span("parent"):
            with tracing.leaf("wait"):
                await asyncio.sleep(10)

    async def run():
        task = asyncio.ensure_future(main())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert spans.one("wait").attributes["error.type"] == "CANCELLED"


def test_a_leaf_that_outlives_its_parent_is_sent_on_its_own(spans):
    parent = tracing.start("parent")
    with tracing.activate(parent):
        block = tracing.leaf("late")
        block.__enter__()
    tracing.finish(parent)
    block.__exit__(None, None, None)
    late = spans.one("late")
    assert late.parent.span_id == spans.one("parent").context.span_id
    assert late.status.status_code is StatusCode.OK


def test_under_a_span_not_exais_a_leaf_is_an_ordinary_span(spans):
    remote = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(remote)):
        with tracing.leaf("step") as sp:
            assert current_span() is sp
    step = spans.one("step")
    assert step.context.trace_id == 0x1234 and step.parent.span_id == 0x5678


def test_records_with_leaves_expand_to_a_span_each_and_are_counted_so():
    records: list = []
    tracer = RecordingTracer(SpanSource(tracing_sampler(), records.append))
    with tracing.activate(tracer.start_span("a")):
        for name in ("x", "y"):
            Leaf(current_span(), name).end_ok()
        current_span().end()
    assert len(records) == 1 and spans_in(records) == 3
    expanded = expand(records)
    assert [r[0] for r in expanded] == ["x", "y", "a"]
    assert {r[3] for r in expanded[:2]} == {records[0][2]}


def tracing_sampler() -> object:
    from opentelemetry.sdk.trace.sampling import DEFAULT_ON

    return DEFAULT_ON


async def test_a_span_submitted_under_is_current_for_the_task_and_ends_with_it(spans):
    """tracing.submit_under: the task the submit starts inherits the span, which ends
    when the task is done; a submit that answers at once ends it at once."""
    seen: list[object] = []

    async def call() -> None:
        seen.append(current_span())
        await asyncio.sleep(0)

    def submit(name: str) -> asyncio.Task[None] | None:
        return asyncio.get_running_loop().create_task(call()) if name == "runs" else None

    face = tracing.start("call_tool runs")
    task = tracing.submit_under(face, submit, "runs")
    assert current_span() is not face  # current only while submitting
    assert spans.named("call_tool runs") == []
    await task
    await asyncio.sleep(0)  # the done callback
    assert seen == [face] and spans.one("call_tool runs").status.status_code is StatusCode.OK
    at_once = tracing.start("call_tool answered")
    assert tracing.submit_under(at_once, submit, "answered") is None
    assert spans.one("call_tool answered").end_time is not None
