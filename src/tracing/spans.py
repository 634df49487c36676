"""exai's spans: OpenTelemetry API spans that end as plain records.

The SDK's span is built for every exporter and every limit: sampling through a
chain of objects, bounded attribute maps with locks, a processor chain on start
and end. Measured on this daemon, creating and ending the four spans of an
``echo`` call cost about 70 µs on the call path, more than the untraced call
itself. :class:`RecordingTracer` makes spans of the same API
(:class:`opentelemetry.trace.Span`: context propagation, ``traceparent`` in and
out, attributes, events, links and status work as they do with the SDK) whose
attributes are a plain dict, and whose :meth:`~RecordedSpan.end` hands one
tuple (:mod:`exai.tracing.records`) to a sink: a deque the writer process
drains (:mod:`exai.tracing.link`), or, for tests and embedding, a converter to
the SDK's ``ReadableSpan`` and an SDK span processor.

Sampling keeps the SDK's samplers (``OTEL_TRACES_SAMPLER``): the built-in
always-on and always-off ones and their parent-based forms are decided here
from the parent's flag, any other sampler is asked as the SDK would ask it.
Trace flags are the SDK's, with the W3C random-trace-id flag on the traces
this process starts. A trace id this process makes begins with the time in
milliseconds (48 bits) and ends with 80 random bits, as a UUIDv7 does: the
flag promises only the last 56 bits random, and what reads ids for chance (a
``traceidratio`` sampler, tail keeping's share) reads the low 64. Ids in time
order are appended to the request log's index on ``trace_id``
(:mod:`exai.store.call_log`); wholly random ones landed all over it, and
SQLite wrote a page of the index for nearly every row (about 9 µs a call on
the store's thread). Span ids are random.
"""

from __future__ import annotations

import contextlib
import random
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, DEFAULT_OFF, DEFAULT_ON, Sampler
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.span import TraceState

from exai.tracing.current import SPAN_KEY, current_context
from exai.tracing.records import CALL as _CALL
from exai.tracing.records import Record, clean_value

__all__ = ["OK_STATUS", "UNSET_STATUS", "Leaf", "RecordedSpan", "RecordingTracer", "SpanSource"]

_FLAGS: Final = tuple(TraceFlags(i) for i in range(4))
_SAMPLED, _RANDOM = TraceFlags.SAMPLED, TraceFlags.RANDOM_TRACE_ID
_ROOT_FLAGS: Final = int(_SAMPLED | _RANDOM)
_SERVER: Final = SpanKind.SERVER.value
UNSET_STATUS: Final = Status(StatusCode.UNSET)
OK_STATUS: Final = Status(StatusCode.OK)
_UNSET, _OK = UNSET_STATUS, OK_STATUS
_NO_STATE: Final = TraceState()
_PLAIN: Final = frozenset({str, bool, int, float})
_GETRANDBITS: Final = random.getrandbits
_NS: Final = time.time_ns
Sink = Callable[[Record], None]


class SpanSource:
    """What every span of one provider shares: the sampler and where records go."""

    __slots__ = ("_decide", "_state", "sampler", "sink")

    def __init__(self, sampler: Sampler, sink: Sink) -> None:
        self.sampler = sampler
        self.sink = sink
        # The built-in samplers whose decision needs no call: a child of a sampled
        # parent is sampled, a root as the sampler says.
        root = {id(ALWAYS_ON): True, id(DEFAULT_ON): True, id(ALWAYS_OFF): False,
                id(DEFAULT_OFF): False}.get(id(sampler))  # fmt: skip
        inherit = sampler is DEFAULT_ON or sampler is DEFAULT_OFF
        self._decide: tuple[bool | None, bool] = (root, inherit)
        self._state: tuple[TraceState, str] = (_NO_STATE, "")

    def state_text(self, state: TraceState) -> str:
        """A trace state as OTLP carries it (the SDK's encoder's form); a trace's spans
        share their parent's state, so the last one is kept."""
        last, text = self._state
        if state is not last:
            text = ",".join(f"{k}={v}" for k, v in state.items())
            self._state = (state, text)
        return text


class RecordingTracer(trace.Tracer):
    """Starts :class:`RecordedSpan` s (sampled) or ``NonRecordingSpan`` s (not)."""

    def __init__(self, source: SpanSource) -> None:
        self._source = source
        # Whether a child of one of these spans is sampled as its parent is, no sampler
        # asked (the built-in samplers): what a :class:`Leaf` needs of it.
        self.inherits = source._decide[0] is not None
        # Whether every root is sampled, no sampler asked (the default, always_on).
        self.roots_sampled = source._decide[0] is True

    def start_span(
        self,
        name: str,
        context: Any = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        source = self._source
        current = (current_context() if context is None else context).get(SPAN_KEY)
        if type(current) is RecordedSpan and source._decide[0] is not None:
            # A child of one of exai's own spans, under a sampler whose decision for it
            # is the parent's (sampled): its ids and flags straight from the parent.
            parent: Any = current  # a RecordedSpan (typing.cast would be a call)
            up = parent._head
            head = (up[0], _GETRANDBITS(64) or 1, up[1], False, up[4], up[5], kind._value_)
            sp = RecordedSpan(name, head, parent._state, source.sink, start_time or _NS())
        elif current is None and source._decide[0] is True:
            # A root under a sampler that samples every root (the default, always_on):
            # a trace of its own, sampled, its id random in the W3C sense.
            trace_id = _NS() // 1_000_000 << 80 | _GETRANDBITS(80)
            head = (trace_id, _GETRANDBITS(64) or 1, 0, False, _ROOT_FLAGS, "", kind._value_)
            sp = RecordedSpan(name, head, _NO_STATE, source.sink, start_time or _NS())
        else:
            if current is None or not isinstance(current, trace.Span):
                current = trace.INVALID_SPAN
            started = self._start(source, current, name, context, kind, attributes, links,
                                  start_time)  # fmt: skip
            if type(started) is not RecordedSpan:
                return started
            sp = started
        if not (record_exception and set_status_on_exception):
            sp._exc = (record_exception, set_status_on_exception)
        if attributes:
            if _PLAIN.issuperset(map(type, attributes.values())):
                sp.attributes.update(attributes)  # nothing to clean: one step, not one a key
            else:
                sp.set_attributes(attributes)
        if links:
            sp.links = [(lk.context, dict(lk.attributes or {})) for lk in links
                        if lk.context.is_valid]  # fmt: skip
        return sp

    def server(self, name: str, parent: Any, attributes: dict[str, Any]) -> trace.Span:
        """A face's span for a call it took (kind ``SERVER``), whose ``attributes`` are
        plain values (str, bool, int, float), continuing ``parent`` (a context a
        ``traceparent`` carried), or the current span when None."""
        if parent is None and self.roots_sampled and current_context().get(SPAN_KEY) is None:
            return self.root_server(name, attributes)
        return self.start_span(name, parent, SpanKind.SERVER, attributes)

    def root_server(self, name: str, attributes: dict[str, Any]) -> RecordedSpan:
        """:meth:`server` for a call that names no parent, in the fewest steps: the root
        of a trace this process starts. Only where :meth:`start_span` would make
        this span: the sampler samples every root (:attr:`roots_sampled`) and no
        span is current; the caller checks."""
        start = _NS()
        head = (start // 1_000_000 << 80 | _GETRANDBITS(80), _GETRANDBITS(64) or 1, 0, False,
                _ROOT_FLAGS, "", _SERVER)  # fmt: skip
        sp = RecordedSpan(name, head, _NO_STATE, self._source.sink, start)
        sp.attributes = attributes
        return sp

    def child(self, parent: RecordedSpan, name: str, attributes: dict[str, Any]) -> trace.Span:
        """A child of ``parent`` with ``attributes`` as its own dict: the call path's way
        to its ``execute_tool`` span, whose attribute values are plain (str, bool, int,
        float; None is left out), in fewer steps than :meth:`start_span`'s. A span
        as :meth:`start_span` would make it, under a sampler that must be asked."""
        source = self._source
        if source._decide[0] is None:
            return self.start_span(name, trace.set_span_in_context(parent), attributes=attributes)
        up = parent._head
        head = (up[0], _GETRANDBITS(64) or 1, up[1], False, up[4], up[5], 0)
        sp = RecordedSpan(name, head, parent._state, source.sink, _NS())
        if None in attributes.values():
            attributes = {k: v for k, v in attributes.items() if v is not None}
        sp.attributes = attributes
        return sp

    def _start(self, source: SpanSource, current: trace.Span, name: str, context: Any,
               kind: SpanKind, attributes: Mapping[str, Any] | None,
               links: Sequence[Link] | None, start_time: int | None) -> trace.Span:  # fmt: skip
        """A root span, a child of a caller's or another tracer's span, or any span
        under a sampler that must be asked."""
        found = current.get_span_context() if current is not trace.INVALID_SPAN else None
        parent = found if found is not None and found.is_valid else None
        if parent is not None:
            trace_id, trace_state, parent_flags = (
                parent.trace_id,
                parent.trace_state,
                parent.trace_flags,
            )
            random_bit, remote = parent_flags & _RANDOM, parent.is_remote
        else:
            trace_state, random_bit, remote, parent_flags = _NO_STATE, _RANDOM, False, _FLAGS[0]
            trace_id = _NS() // 1_000_000 << 80 | _GETRANDBITS(80)
        root, inherit = source._decide
        extra: Mapping[str, Any] | None = None
        if parent is not None and (inherit or (root is not None and not remote)):
            sampled = bool(parent_flags & _SAMPLED)
        elif root is not None:
            sampled = root
        else:
            result = source.sampler.should_sample(context, trace_id, name, kind, attributes,
                                                  links)  # fmt: skip
            sampled = result.decision.is_sampled()
            trace_state, extra = result.trace_state or _NO_STATE, result.attributes
        flags = random_bit | (_SAMPLED if sampled else 0)
        span_id = _GETRANDBITS(64) or 1
        if not sampled:
            return NonRecordingSpan(SpanContext(trace_id, span_id, False, _FLAGS[flags],
                                                trace_state))  # fmt: skip
        state = "" if trace_state is _NO_STATE else source.state_text(trace_state)
        head = (trace_id, span_id, parent.span_id if parent is not None else 0, remote, flags,
                state, kind._value_)  # fmt: skip
        # Its SpanContext is made when first asked for (most never are).
        sp = RecordedSpan(name, head, trace_state, source.sink, start_time or _NS())
        if extra:
            sp.set_attributes(extra)
        return sp

    # The API declares this with a decorator of its own, which is private; the
    # standard one makes the same context manager.
    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Any = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        sp = self.start_span(name, context, kind, attributes, links, start_time,
                             record_exception, set_status_on_exception)  # fmt: skip
        with trace.use_span(
            sp,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class RecordedSpan(trace.Span):
    """A sampled span; :meth:`end` sends its record to the sink, once."""

    # The rarely set ones (below) go in the instance's __dict__ (the API's Span has one),
    # made only for a span that has them.
    __slots__ = ("_ctx", "_head", "_sink", "_state", "attributes", "end_time", "ends_with",
                 "leaves", "name", "outer", "start_time", "status")  # fmt: skip
    events: list[tuple[str, int, dict[str, Any]]] | None = None
    links: list[tuple[SpanContext, dict[str, Any]]] | None = None
    _exc: tuple[bool, bool] = (True, True)  # record_exception, set_status_on_exception

    def __init__(self, name: str, head: tuple[Any, ...], state: TraceState, sink: Sink,
                 start_time: int, ctx: SpanContext | None = None) -> None:  # fmt: skip
        self.name = name
        self._head = head  # the record's fields from trace_id to kind
        self._state = state
        self._ctx = ctx  # made when first asked for
        self._sink = sink
        self.start_time = start_time
        self.end_time: int | None = None
        self.attributes: dict[str, Any] = {}
        self.status = _UNSET
        # Its children that ended well without children of their own (:class:`Leaf`),
        # sent in its record as (name, span_id, start, end).
        self.leaves: list[tuple[str, int, int, int]] | None = None
        # The task whose end ends this span (exai.tracing.end_with_task), while its done
        # callback still waits.
        self.ends_with: Any = None
        # What this span was before :meth:`nest` made it its own child: ((name, *head,
        # start), attributes, status, leaves), or for the common call its call record's
        # first fields (:func:`_kept` reads either).
        self.outer: tuple[Any, ...] | None = None

    def get_span_context(self) -> SpanContext:
        ctx = self._ctx
        if ctx is None:
            head = self._head
            ctx = self._ctx = SpanContext(head[0], head[1], False, _FLAGS[head[4]], self._state)
        return ctx

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: Any) -> None:
        if self.end_time is None:
            value = clean_value(value)
            if value is not None:
                self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self.end_time is None:
            mine = self.attributes
            for key, value in attributes.items():
                if type(value) not in _PLAIN:
                    value = clean_value(value)
                    if value is None:
                        continue
                mine[key] = value

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None,
                  timestamp: int | None = None) -> None:  # fmt: skip
        if self.end_time is not None:
            return
        cleaned = {}
        for key, value in (attributes or {}).items():
            value = clean_value(value)
            if value is not None:
                cleaned[key] = value
        if self.events is None:
            self.events = []
        self.events.append((name, timestamp or _NS(), cleaned))

    def add_link(self, context: SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        if self.end_time is None and context.is_valid:
            if self.links is None:
                self.links = []
            self.links.append((context, dict(attributes or {})))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def succeed(self) -> None:
        """Status ``OK``, unless a status was set (:func:`exai.tracing.succeed`'s rule)."""
        if self.end_time is None and self.status is _UNSET:
            self.status = _OK

    def end_ok(self, _task: Any = None) -> None:
        """:meth:`succeed` and :meth:`end` (also a task's done callback)."""
        if self.end_time is None:
            if self.status is _UNSET:
                self.status = _OK
            self.end()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # As the SDK: OK is final, and UNSET changes nothing.
        if self.end_time is not None or self.status.status_code is StatusCode.OK:
            return
        if not isinstance(status, Status):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self.status = status

    def record_exception(
        self,
        exception: BaseException,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        stack = "".join(traceback.format_exception(type(exception), exception,
                                                   exception.__traceback__))  # fmt: skip
        event = {"exception.type": type(exception).__qualname__,
                 "exception.message": str(exception), "exception.stacktrace": stack,
                 "exception.escaped": str(escaped)}  # fmt: skip
        event.update(attributes or {})
        self.add_event("exception", event, timestamp)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None and self.is_recording():
            record, set_status = self._exc
            if record:
                self.record_exception(exc, escaped=True)
            if set_status:
                self.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.end()

    def nest(self, name: str, attributes: dict[str, Any], task: Any = None) -> None:
        """Become a child of the span this was, named ``name`` with ``attributes`` (plain
        values, none of them None: the dict becomes the span's), starting now: what this
        was is kept (:attr:`outer`) and ends with it, as :meth:`end_ok` would end it.
        ``task``: the task this span was to end with (:func:`exai.tracing.end_with_task`),
        whose done callback is removed; the nested span's owner ends it.

        A face's span, current in the task of the call it took, becomes that call's
        ``execute_tool`` span (:func:`exai.daemon.traced.call_span`): one object
        instead of two, made current once, with no context of its own made in the
        task. The spans sent are the ones a child would have made. Only for a span
        with no events or links, whose children are sampled as it is (a built-in
        sampler), and whose :class:`opentelemetry.trace.SpanContext` its owner no
        longer needs: from here on it is the child's.
        """
        head = self._head
        leaves = self.leaves
        if self.status is _UNSET and leaves is not None and len(leaves) == 1:
            # The common call's: the first fields of its call record (its face's span and
            # that span's one leaf, exai.tracing.records.CALL), made once.
            self.outer = (_CALL, self.name, *head, self.start_time, self.attributes, *leaves[0])
        else:
            # What the outer span's record begins with, made once: only its end,
            # attributes, status and leaves wait for the end.
            self.outer = ((self.name, *head, self.start_time), self.attributes, self.status,
                          leaves)  # fmt: skip
        self.name = name
        self._head = (head[0], _GETRANDBITS(64) or 1, head[1], False, head[4], head[5], 0)
        self._ctx = None
        self.start_time = _NS()
        self.attributes = attributes
        self.status = _UNSET
        self.leaves = None
        if task is not None:
            self.ends_with = None
            task.remove_done_callback(self.end_ok)

    def unnest(self) -> RecordedSpan:
        """What :meth:`nest` kept, as a span of its own that the caller ends (a call
        that failed marks both)."""
        outer = self.outer
        assert outer is not None
        self.outer = None
        (name, *head, start), attributes, status, leaves = _kept(outer)
        sp = RecordedSpan(name, tuple(head), self._state, self._sink, start)
        sp.attributes, sp.status, sp.leaves = attributes, status, leaves
        return sp

    def end_after(self, name: str, started: int) -> None:
        """A last child, a :class:`Leaf` named ``name`` that began at ``started`` and ends
        now, and this span ending with it, at the same instant: a success unless
        marked failed (:meth:`end_ok`). A call's audit step and the call's span
        (:meth:`exai.daemon.traced.CallSpan.audited`): for the common call, its
        record made at once, the leaf in it, no list made for the leaf."""
        if self.end_time is not None:  # ended already: the leaf is a span of its own
            step = Leaf(self, name)
            step.start = started
            step.end_ok()
            return
        end = _NS()
        status, outer = self.status, self.outer
        if status is _UNSET:
            self.status = status = _OK
        if (outer is not None and type(outer[0]) is int and status is _OK and self.leaves is None
                and self.events is None and self.links is None):  # fmt: skip
            # The common call, as one call record (exai.tracing.records.CALL).
            self.end_time = end
            # A concatenation: one step, where unpacking builds a list first.
            self._sink(outer + (self.name, self._head[1], self.start_time, end,  # noqa: RUF005
                                self.attributes, name, _GETRANDBITS(64) or 1, started,
                                end))  # fmt: skip
            return
        leaf = (name, _GETRANDBITS(64) or 1, started, end)
        if self.leaves is None:
            self.leaves = [leaf]
        else:
            self.leaves.append(leaf)
        self.end(end)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            return
        self.end_time = end = end_time or _NS()
        status = self.status
        code = 1 if status is _OK else 0 if status is _UNSET else status.status_code._value_
        outer = self.outer
        if (outer is not None and type(outer[0]) is int and code == 1 and self.events is None
                and self.links is None):  # fmt: skip
            mine = self.leaves
            if mine is not None and len(mine) == 1:
                # The common call, face and call span and a leaf each, as one call record
                # (exai.tracing.records.CALL).
                self._sink(outer + (self.name, self._head[1], self.start_time, end,
                                    self.attributes) + mine[0])  # fmt: skip
                return
        links = None
        if self.links:
            links = tuple((c.trace_id, c.span_id, int(c.trace_flags), "", c.is_remote, a)
                          for c, a in self.links)  # fmt: skip
        sink = self._sink
        sink((self.name, *self._head, self.start_time, end, self.attributes,
              tuple(self.events) if self.events else None, links,
              code, None if code < 2 else status.description, self.leaves))  # fmt: skip
        outer = self.outer
        if outer is not None:  # the span this was, ended as end_ok ends a span
            begun, attributes, status, leaves = _kept(outer)
            code = 1 if status is _UNSET or status is _OK else status.status_code._value_
            # A concatenation: one step, where unpacking builds a list first.
            sink(begun + (end, attributes, None, None, code,  # noqa: RUF005
                          None if code < 2 else status.description, leaves))  # fmt: skip


def _kept(outer: tuple[Any, ...]) -> tuple[Any, ...]:
    """What :meth:`RecordedSpan.nest` kept, as ``(begun, attributes, status, leaves)``,
    from either of its two shapes: that one, or a call record's first fields (its
    first item :data:`~exai.tracing.records.CALL`, status unset, one leaf)."""
    if type(outer[0]) is int:
        return outer[1:10], outer[10], _UNSET, [outer[11:15]]
    return outer


class Leaf:
    """A child of a :class:`RecordedSpan` that starts no span of its own and is never
    made current (exai's admission and audit steps): timed, and sent in its
    parent's record when it ends well, so it costs a span id and two clock reads
    instead of a span object, a context of its own and a record. The span
    writer's encoder writes it as a span of its own from its parent's record
    (:meth:`exai.tracing.otlp.Encoder.span`); :func:`exai.tracing.records.expand`
    makes the same span for tail keeping and for
    :class:`~exai.tracing.provider.ProcessorSink`. One that fails, or outlives
    its parent, becomes a :class:`RecordedSpan` with the same ids and start
    (:meth:`span`). Used as a block, it is :func:`exai.tracing.leaf`'s."""

    __slots__ = ("name", "parent", "span_id", "start")

    def __init__(self, parent: RecordedSpan, name: str) -> None:
        self.parent = parent
        self.name = name
        self.span_id = _GETRANDBITS(64) or 1
        self.start = _NS()

    def end_ok(self) -> None:
        parent = self.parent
        if parent.end_time is not None:
            self.span().end_ok()
        elif parent.leaves is None:
            parent.leaves = [(self.name, self.span_id, self.start, _NS())]
        else:
            parent.leaves.append((self.name, self.span_id, self.start, _NS()))

    def span(self) -> RecordedSpan:
        parent = self.parent
        up = parent._head
        head = (up[0], self.span_id, up[1], False, up[4], up[5], SpanKind.INTERNAL._value_)
        return RecordedSpan(self.name, head, parent._state, parent._sink, self.start)
