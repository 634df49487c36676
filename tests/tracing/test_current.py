"""exai reads and sets the current span without the API's calls; OpenTelemetry's API
in any other code must still see, and set, the same current span."""

from __future__ import annotations

import asyncio
import contextvars
import logging

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from exai import tracing
from exai.tracing import current


def test_the_fast_path_is_on_with_the_default_runtime_context():
    # Without it every read would take the API's slow route; the bench would show it,
    # no test would.
    assert current.variable() is not None, (
        "opentelemetry.context's runtime context no longer keeps the current Context as "
        "a ContextVar's value: exai.tracing.current takes the API's own calls (slower)"
    )


def test_code_using_the_api_sees_the_span_exai_made_current(spans):
    before = trace.get_current_span()
    with tracing.span("outer") as outer:
        assert trace.get_current_span() is outer
        assert otel_context.get_current().get(current.SPAN_KEY) is outer
        with tracing.span("inner") as inner:
            assert trace.get_current_span() is inner
            assert tracing.trace_id() == f"{inner.get_span_context().trace_id:032x}"
        assert trace.get_current_span() is outer
    assert trace.get_current_span() is before
    assert spans.one("inner").parent.span_id == spans.one("outer").context.span_id


def test_a_span_made_current_through_the_api_parents_exais_spans(spans):
    remote = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(remote)):
        assert current.current_span().get_span_context() == remote
        with tracing.span("child"):
            pass
        assert tracing.trace_id() == f"{0x1234:032x}"
    child = spans.one("child")
    assert child.context.trace_id == 0x1234
    assert child.parent.span_id == 0x5678


def test_other_values_in_the_current_context_stay_while_a_span_is_current(spans):
    token = otel_context.attach(otel_context.set_value("caller-key", "kept"))
    try:
        with tracing.span("s"):
            assert otel_context.get_value("caller-key") == "kept"
    finally:
        otel_context.detach(token)


async def test_a_task_started_under_an_active_span_sees_it_through_the_api(spans):
    sp = tracing.start("face", kind=tracing.SERVER)
    with tracing.activate(sp):
        task = asyncio.get_running_loop().create_task(_current())
    assert trace.get_current_span() is not sp
    assert await task is sp
    tracing.finish(sp)


async def _current() -> trace.Span:
    return trace.get_current_span()


def test_leaving_with_a_token_of_another_context_is_logged_not_raised(spans, caplog):
    sp = tracing.start("s")
    assert sp is not None
    token = contextvars.copy_context().run(current.enter, sp)
    with caplog.at_level(logging.ERROR, logger="opentelemetry.context"):
        current.leave(token)
    assert "Failed to detach context" in caplog.text
    assert trace.get_current_span() is not sp


async def test_a_call_span_that_takes_over_ends_the_faces_span_itself(spans):
    face = tracing.start("call_tool echo", kind=tracing.SERVER)
    taken: list[bool] = []

    async def call() -> None:
        taken.append(tracing.take_over_end(face, asyncio.current_task()))

    task = asyncio.get_running_loop().create_task(call())
    tracing.end_with_task(face, task)
    await task
    await asyncio.sleep(0)  # a done callback would have run by now
    assert taken == [True]
    assert face.is_recording()  # ended by whoever took it over, not by the task's end
    face.end_ok()
    assert spans.one("call_tool echo").status.is_ok


async def test_a_faces_span_still_ends_when_its_task_never_ran(spans):
    face = tracing.start("call_tool echo", kind=tracing.SERVER)
    task = asyncio.get_running_loop().create_task(_current())
    tracing.end_with_task(face, task)
    task.cancel()  # before its first step: no call span ever takes the end over
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert spans.one("call_tool echo").status.is_ok
