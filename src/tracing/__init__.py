"""Traces: each call as OpenTelemetry spans, from the face that took it to the vendor.

One module owns tracing. The edge (``exai serve``, ``exai shim``) calls
:func:`exai.tracing.setup.configure` once; until it does, or when no OTLP
endpoint is configured, :data:`state.tracer` is ``None`` and every place that
could start a span checks only that (one attribute read on the hot path, no
OpenTelemetry call at all). When it is on, spans go to the span
writer process (:mod:`exai.tracing.writer`), which keeps, masks, encodes and
exports them: a call builds its spans as plain records
(:mod:`exai.tracing.spans`) and never waits for the collector, and a dead
collector loses spans, never calls.

What the rest of exai uses:

- :data:`state` (``state.tracer``, ``state.content``): whether tracing is on,
  and whether prompt and completion text may be put on spans and error
  messages into their status and the log (``EXAI_TRACE_CONTENT``; off unless
  an operator turns it on);
- :func:`span`: a context manager for the spans where the work happens (a model
  turn, a provider request, a store write); it yields ``None`` when tracing is
  off, ends the span with status ``OK`` when the block does, and records an
  error on the span as exai reports it (status ``ERROR`` with
  :func:`describe_error`'s text, ``error.type`` the exai error code);
  :func:`leaf` the same for a step that starts no span inside it and needs
  none current, at a fraction of the cost; :func:`step_done` the same for a
  step the caller timed itself (a call's admission and audit steps);
- :func:`start` / :func:`finish`: the same for spans that begin in one place
  and end in another; :func:`end_with_task` for a face's span that ends when
  the call's task does; :func:`serve` a face's span made and its call
  submitted under it in one step (a WebSocket call: its span becomes the
  call's own, :meth:`~exai.tracing.spans.RecordedSpan.nest`);
- :func:`extract`: the context a W3C ``traceparent`` and ``tracestate`` carry,
  from HTTP headers, MCP's ``_meta`` or the WebSocket ``call_tool`` frame;
  :func:`carrier` the same pair for the current span, to pass on;
- :func:`trace_id`: the current trace's id, which every result's metadata carries.

The OpenTelemetry global tracer provider is never set: the provider lives here,
so a test installs an in-memory exporter for itself (:func:`install`) and
removes it after, and nothing leaks between tests.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from exai.errors import ExaiError
from exai.tracing.current import SPAN_KEY, current_context, current_span, enter, leave, set_context
from exai.tracing.errors import ERROR_TEXT_MAX, describe_error, error_code, stack_without_message
from exai.tracing.propagation import carrier, extract, extract_from, links_to
from exai.tracing.spans import OK_STATUS as _OK
from exai.tracing.spans import UNSET_STATUS as _UNSET
from exai.tracing.spans import Leaf, RecordedSpan, RecordingTracer

_NS = time.time_ns
_GETRANDBITS = random.getrandbits

__all__ = [
    "CLIENT",
    "ERROR_TEXT_MAX",
    "INTERNAL",
    "ROOT",
    "SERVER",
    "Link",
    "Span",
    "activate",
    "carrier",
    "describe_error",
    "end_with_task",
    "event",
    "extract",
    "extract_from",
    "fail",
    "fail_current",
    "finish",
    "install",
    "leaf",
    "leaf_of",
    "links_to",
    "reset",
    "serve",
    "set_attributes",
    "span",
    "start",
    "state",
    "step_done",
    "submit_under",
    "succeed",
    "take_over_end",
    "trace_id",
    "trace_id_of",
]

CLIENT, INTERNAL, SERVER = SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.SERVER

# A parent for spans that start a trace of their own whatever is current.
ROOT = otel_context.Context()
_SCOPE = "exai"


@dataclass(slots=True)
class _State:
    tracer: RecordingTracer | None = None  # None: tracing is off
    content: bool = False  # prompt and completion text may go on spans
    provider: Any = None  # a SpanProvider (exai.tracing.provider), for flush and shutdown


state = _State()


def install(provider: Any, *, content: bool = False) -> None:
    """Make ``provider`` (a :class:`~exai.tracing.provider.SpanProvider`) the one exai's
    spans go to."""
    from exai import __version__

    state.tracer = provider.get_tracer(_SCOPE, __version__)
    state.provider = provider
    state.content = content


def reset() -> Any:
    """Turn tracing off; returns the provider that was installed (not shut down)."""
    provider = state.provider
    state.tracer, state.provider, state.content = None, None, False
    return provider


# --- context ------------------------------------------------------------------


def trace_id_of(sp: Span) -> str | None:
    if type(sp) is RecordedSpan:  # its ids are valid, and read without a SpanContext
        return f"{sp._head[0]:032x}"  # type: ignore[attr-defined]
    ctx = sp.get_span_context()
    return trace.format_trace_id(ctx.trace_id) if ctx.is_valid else None


def trace_id() -> str | None:
    """The current trace's id (32 hex digits), or None when there is none."""
    return trace_id_of(current_span())


# --- spans --------------------------------------------------------------------


def start(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    parent: otel_context.Context | None = None,
    links: list[Link] | None = None,
) -> Span | None:
    """Start a span that some other code will :func:`finish`; None when tracing is off.
    Without ``parent`` it is a child of the current span."""
    tracer = state.tracer
    if tracer is None:
        return None
    return tracer.start_span(name, context=parent, kind=kind, attributes=attributes,
                             links=links)  # fmt: skip


class _Active:
    __slots__ = ("sp", "token")

    def __init__(self, sp: Span | None) -> None:
        self.sp = sp
        self.token: Any = None

    def __enter__(self) -> None:
        if self.sp is not None:
            self.token = enter(self.sp)

    def __exit__(self, *_exc: Any) -> None:
        if self.token is not None:
            leave(self.token)


_INACTIVE = _Active(None)


def activate(sp: Span | None) -> contextlib.AbstractContextManager[None]:
    """Make ``sp`` the current span inside the block (tasks created there inherit it)."""
    return _Active(sp) if sp is not None else _INACTIVE


def finish(sp: Span | None, error: BaseException | None = None) -> None:
    """End ``sp``: failed with ``error``, else a success (status ``OK``) unless it
    was marked failed before."""
    if sp is None:
        return
    if error is not None:
        fail(sp, error)
    else:
        succeed(sp)
    sp.end()


def end_with_task(sp: Span | None, task: Any) -> None:
    """End ``sp`` (a success unless marked failed) when ``task`` is done.

    A call's own span (:mod:`exai.daemon.traced`) takes this over when the task
    starts it, and ends ``sp`` right after itself, in the task's last step;
    the done callback stays for a task cancelled before it ever ran.
    """
    if sp is None:
        return
    if type(sp) is RecordedSpan:
        sp.ends_with = task  # type: ignore[attr-defined]
        task.add_done_callback(sp.end_ok)  # type: ignore[attr-defined]
    else:
        task.add_done_callback(lambda _task: finish(sp))


def submit_under(sp: Span | None, submit: Callable[..., Any], *args: Any) -> Any:
    """``submit(*args)`` with ``sp`` current, so the task it starts inherits it; ``sp``
    then ends as :func:`end_with_task` says with that task, or at once (a success
    unless marked failed) when it returns None, or failed when it raises (a bug:
    the face answers it, and its span is sent all the same). A face's span around
    the call it hands to the core, in one step."""
    if sp is None:
        return submit(*args)
    return _submitted(sp, enter(sp), submit, args)


def _submitted(sp: Span, token: Any, submit: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """:func:`submit_under` once ``sp`` is current (``token`` makes it current no more)."""
    try:
        task = submit(*args)
    except BaseException as exc:
        leave(token)
        finish(sp, exc)
        raise
    leave(token)
    if task is None:
        finish(sp)
    elif type(sp) is RecordedSpan:
        sp.ends_with = task  # type: ignore[attr-defined]
        task.add_done_callback(sp.end_ok)  # type: ignore[attr-defined]
    else:
        end_with_task(sp, task)
    return task


def serve(
    name: str,
    attributes: dict[str, Any],
    traceparent: Any,
    tracestate: Any,
    submit: Callable[..., Any],
    *args: Any,
) -> Any:
    """A face's span (kind ``SERVER``) for a call it took, continuing ``traceparent``
    and ``tracestate`` (:func:`extract`), with ``attributes`` of plain values, and
    ``submit(*args)`` under it (:func:`submit_under`): the two in one step.

    The common case, a trace this process starts (no ``traceparent``, no span
    current, a sampler that samples every root), takes the fewest steps: the span
    made without the checks :meth:`~exai.tracing.spans.RecordingTracer.server`
    repeats, and made current from the context already read. It runs for every
    traced WebSocket call, and on the event loop each step of it costs every call."""
    tracer = state.tracer
    if tracer is None:
        return submit(*args)
    if traceparent or not tracer.roots_sampled:
        return submit_under(tracer.server(name, extract(traceparent, tracestate), attributes),
                            submit, *args)  # fmt: skip
    outside = current_context()
    if outside.get(SPAN_KEY) is not None:
        return submit_under(tracer.server(name, None, attributes), submit, *args)
    sp = tracer.root_server(name, attributes)
    return _submitted(sp, set_context(Context({**outside, SPAN_KEY: sp})), submit, args)


def take_over_end(parent: Span, task: Any) -> bool:
    """True if ``parent`` was to end with ``task`` (:func:`end_with_task`), and now
    ends when the caller says, its done callback removed."""
    if type(parent) is not RecordedSpan or parent.ends_with is not task:  # type: ignore[attr-defined]
        return False
    parent.ends_with = None  # type: ignore[attr-defined]
    return task.remove_done_callback(parent.end_ok) == 1  # type: ignore[attr-defined]


def succeed(sp: Span | None) -> None:
    """Status ``OK`` on a span that ends well; a span already failed stays failed
    (the SDK would let ``OK`` overwrite ``ERROR``, so it is checked here)."""
    if type(sp) is RecordedSpan:  # not isinstance: Span is an ABC, a slow check
        rs: Any = sp
        if rs.end_time is None and rs.status is _UNSET:
            rs.status = _OK
        return
    if sp is None or not sp.is_recording():
        return
    status = getattr(sp, "status", None)
    if status is None or status.status_code is StatusCode.UNSET:
        sp.set_status(_OK)


def fail(sp: Span | None, error: BaseException | Any) -> None:
    """Mark ``sp`` failed as exai reports it: ``error.type`` and ``exai.error.code``
    are the exai error code; a bug (not an ExaiError) is also recorded as an exception.

    The status description is :func:`~exai.tracing.errors.describe_error`: with
    content off, the code and the vendor's status and code, never the message,
    which may quote the prompt; a bug's exception event then carries its type and
    frames, not its message.
    """
    if sp is None or not sp.is_recording():
        return
    content = state.content
    code = error_code(error)
    if isinstance(error, ExaiError) or code is not None:
        sp.set_attributes({"error.type": str(code), "exai.error.code": str(code)})
        sp.set_status(Status(StatusCode.ERROR, describe_error(error, content=content)))
        return
    sp.set_attribute("error.type", type(error).__qualname__)
    if isinstance(error, BaseException):
        if content:
            sp.record_exception(error)
        else:
            where = stack_without_message(error)
            sp.add_event("exception", {"exception.type": type(error).__qualname__,
                                       "exception.stacktrace": where})  # fmt: skip
    sp.set_status(Status(StatusCode.ERROR, describe_error(error, content=content)))


def event(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """An event on the current span (a retry, a fallback); nothing when tracing is off."""
    if state.tracer is not None:
        sp = current_span()
        if sp.is_recording():
            sp.add_event(name, attributes)


def fail_current(error: BaseException | Any) -> None:
    """:func:`fail` on the current span."""
    if state.tracer is not None:
        fail(current_span(), error)


class _Block:
    """What :func:`span` returns: the span current inside the block, ended after it.
    (A class rather than a generator: it runs for every span, twice per call.)"""

    __slots__ = ("sp", "token")

    def __init__(self, sp: Span | None) -> None:
        self.sp = sp
        self.token: Any = None

    def __enter__(self) -> Span | None:
        sp = self.sp
        if sp is not None:
            self.token = enter(sp)
        return sp

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        sp = self.sp
        if sp is None:
            return
        if exc is None and type(sp) is RecordedSpan:  # the common case, in fewest calls
            leave(self.token)
            sp.end_ok()  # type: ignore[attr-defined]
            return
        try:
            _close(sp, exc)
        finally:
            leave(self.token)


_OFF = _Block(None)


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    parent: otel_context.Context | None = None,
    links: list[Link] | None = None,
) -> contextlib.AbstractContextManager[Span | None]:
    """A span around a block, current inside it; None inside when tracing is off.

    An exception leaving the block marks the span failed (:func:`fail`); a
    cancellation is recorded as ``CANCELLED``. Use it in a ``with`` at once: the
    span starts when this is called.
    """
    tracer = state.tracer
    if tracer is None:
        return _OFF
    return _Block(tracer.start_span(name, context=parent, kind=kind, attributes=attributes,
                                    links=links))  # fmt: skip


def _close(sp: Span, exc: BaseException | None) -> None:
    """End ``sp`` as a block ends its span: a success unless marked failed, or failed
    with ``exc`` (a cancellation as ``CANCELLED``; an interpreter's exit marks nothing)."""
    try:
        if exc is None:
            succeed(sp)
        elif not isinstance(exc, (GeneratorExit, KeyboardInterrupt, SystemExit)):
            fail(sp, _Cancelled() if _is_cancel(exc) else exc)
    finally:
        sp.end()


class _LeafBlock(Leaf):
    """A :class:`~exai.tracing.spans.Leaf` as the block :func:`leaf` returns."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.end_ok()
        else:
            _close(self.span(), exc)


def step_done(parent: Span | None, name: str, started: int,
              error: BaseException | None = None) -> None:  # fmt: skip
    """A step of ``parent`` (the current span where it ran) that began at ``started``
    (``time.time_ns()``) and ends now, failed with ``error`` if given: the span
    :func:`leaf_of`'s block would have made of it, for a caller that timed the
    step itself (a call's admission and audit, which run for every traced call:
    no block object, three calls fewer)."""
    tracer = state.tracer
    if tracer is None:
        return
    if type(parent) is RecordedSpan and tracer.inherits:
        rs: Any = parent
        if error is None and rs.end_time is None:  # Leaf.end_ok's common case, no Leaf made
            leaf = (name, _GETRANDBITS(64) or 1, started, _NS())
            if rs.leaves is None:
                rs.leaves = [leaf]
            else:
                rs.leaves.append(leaf)
            return
        step = Leaf(rs, name)
        step.start = started
        if error is None:
            step.end_ok()  # its parent has ended: a span of its own
        else:
            _close(step.span(), error)
        return
    _close(tracer.start_span(name, trace.set_span_in_context(parent) if parent else None,
                             start_time=started), error)  # fmt: skip


def leaf_of(parent: Span | None, name: str) -> contextlib.AbstractContextManager[Any]:
    """:func:`leaf` under ``parent``, the current span: what :func:`leaf` would find,
    given."""
    tracer = state.tracer
    if tracer is None:
        return _OFF
    if type(parent) is RecordedSpan and tracer.inherits:
        return _LeafBlock(parent, name)
    return _Block(tracer.start_span(name))


def leaf(name: str) -> contextlib.AbstractContextManager[Any]:
    """A span around a block that starts no span inside it, ended (and failed) as
    :func:`span` ends its span, but never made current: inside the block the
    current span is still its parent. Under one of exai's own spans it is a
    :class:`~exai.tracing.spans.Leaf`, sent in its parent's record; under any
    other, a :func:`span`."""
    return leaf_of(current_context().get(SPAN_KEY), name)


def set_attributes(sp: Span | None, attributes: Mapping[str, Any]) -> None:
    """Set attributes; None values are left out (OpenTelemetry refuses them)."""
    if sp is not None:
        sp.set_attributes(attributes)


class _Cancelled:
    code = "CANCELLED"
    message = "cancelled"


def _is_cancel(exc: BaseException) -> bool:
    import asyncio

    return isinstance(exc, asyncio.CancelledError)
