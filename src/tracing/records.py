"""One ended span as a plain tuple, and the same span as the SDK's ``ReadableSpan``.

A :class:`~exai.tracing.spans.RecordedSpan` ends as a :data:`Record`: a tuple
of plain values (str, int, float, bool, None, tuples, lists and dicts of them),
which :mod:`marshal` writes to the writer process's pipe at a fraction of a
microsecond a span. Its fields, in order:

=====================  ==========================================================
``name``               the span's name
``trace_id``           int, 128 bits
``span_id``            int, 64 bits
``parent_id``          the parent span's id; 0 for none
``parent_remote``      True when the parent came from another process
``flags``              the W3C trace flags, an int
``trace_state``        the W3C ``tracestate`` as OTLP carries it (``k=v,...``)
``kind``               :class:`opentelemetry.trace.SpanKind`'s value
``start``, ``end``     nanoseconds since the epoch
``attributes``         a dict of cleaned values (:func:`clean_value`)
``events``             None, or ``(name, time_ns, attributes)`` tuples
``links``              None, or ``(trace_id, span_id, flags, trace_state,
                       is_remote, attributes)`` tuples
``status_code``        :class:`opentelemetry.trace.StatusCode`'s value
``status_message``     the status's description, or None
``leaves``             None, or the span's children that ended well with none of
                       their own (:class:`~exai.tracing.spans.Leaf`), as
                       ``(name, span_id, start, end)`` tuples: spans of their
                       own once :func:`expand` has made them
=====================  ==========================================================

A call that a face's span took in and that ended well in the common shape (a
face's span nested into its call's, :meth:`~exai.tracing.spans.RecordedSpan.nest`,
one leaf each, no events or links) ends as one *call record* instead of two:
a tuple whose first field is :data:`CALL` (an int where a record has its
name), then the face's span's fields, its leaf's, the call's span's and its
leaf's, flat (:func:`standard` says which is where). Fewer objects cross the
pipe (marshal's cost is per object) and wait for it (the garbage collector's
is too). :func:`standard` makes the two records of it, and every reader of
records (:func:`expand`, :func:`spans_in`, the writer) takes either.

:func:`to_readable` turns a record into the SDK's ``ReadableSpan``, for an SDK
span processor in this process (the tests' in-memory exporter, or anyone who
embeds exai with a processor of their own).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

__all__ = [
    "ATTRIBUTES",
    "CALL",
    "CALL_ATTRIBUTES",
    "CALL_END",
    "CALL_PARENT_ID",
    "CALL_PARENT_REMOTE",
    "CALL_SPANS",
    "CALL_START",
    "CALL_TRACE_ID",
    "END",
    "EVENTS",
    "FACE_ATTRIBUTES",
    "LEAVES",
    "LINKS",
    "PARENT_ID",
    "PARENT_REMOTE",
    "START",
    "STATUS_CODE",
    "TRACE_ID",
    "Record",
    "clean_value",
    "expand",
    "spans_in",
    "standard",
    "to_readable",
]

Record = tuple[Any, ...]
(NAME, TRACE_ID, SPAN_ID, PARENT_ID, PARENT_REMOTE, FLAGS, TRACE_STATE, KIND, START, END,
 ATTRIBUTES, EVENTS, LINKS, STATUS_CODE, STATUS_MESSAGE, LEAVES) = range(16)  # fmt: skip

CALL: Final = 0  # a call record's first field (see the module's docstring)
CALL_SPANS: Final = 4  # the face's span, its leaf, the call's span, its leaf
FACE_ATTRIBUTES, CALL_ATTRIBUTES = 10, 19  # a call record's two attribute maps
# A call record's trace id, its face's parent and whether that is remote, the face's
# start and the call's end (the face's too).
CALL_TRACE_ID, CALL_PARENT_ID, CALL_PARENT_REMOTE, CALL_START, CALL_END = 2, 4, 5, 9, 18
_PLAIN: Final = frozenset({str, bool, int, float})
_FIRST: Final = itemgetter(0)
_KINDS: Final = {kind.value: kind for kind in SpanKind}
_CODES: Final = {code.value: code for code in StatusCode}


def clean_value(value: Any) -> Any:
    """``value`` as an attribute value of plain types, or None to leave it out.

    As the SDK: str, bool, int and float, and sequences of one of them (a
    tuple); anything else is left out. Subclasses (a ``str`` enum) become their
    base type, which is what an OTLP encoder would send of them anyway.
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return None
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items = [v if v is None else clean_value(v) for v in value]
        kinds = {type(v) for v in items if v is not None}
        if len(kinds) > 1 or any(v is None for v, raw in zip(items, value, strict=True)
                                 if raw is not None):  # fmt: skip
            return None
        return tuple(items)
    return None


def standard(records: Sequence[Record]) -> Sequence[Record]:
    """``records`` with each call record made the two records it stands for: the
    call's span (its leaf in it), then the face's (its own), as
    :meth:`~exai.tracing.spans.RecordedSpan.end` would have sent them; ``records``
    itself when it holds none."""
    if all(type(r[0]) is str for r in records):
        return records
    out: list[Record] = []
    for r in records:
        if type(r[0]) is str:
            out.append(r)
            continue
        (_, face_name, trace_id, face_id, face_parent, face_remote, flags, state, face_kind,
         face_start, face_attributes) = r[:11]  # fmt: skip
        name, span_id, start, end, attributes = r[15:20]
        face_leaf, leaf = r[11:15], r[20:24]
        out.append((name, trace_id, span_id, face_id, False, flags, state, 0, start, end,
                    attributes, None, None, 1, None, [leaf]))  # fmt: skip
        out.append((face_name, trace_id, face_id, face_parent, face_remote, flags, state,
                    face_kind, face_start, end, face_attributes, None, None, 1, None,
                    [face_leaf]))  # fmt: skip
    return out


def expand(records: Sequence[Record]) -> list[Record]:
    """``records`` with each record's leaves made records of their own (an internal
    span, status ``OK``, no attributes, the record's span its parent), before it,
    which then has none; call records first made standard (:func:`standard`)."""
    out: list[Record] = []
    for r in standard(records):
        leaves = r[LEAVES]
        if leaves:
            trace_id, parent, flags, state = r[TRACE_ID], r[SPAN_ID], r[FLAGS], r[TRACE_STATE]
            out += [(name, trace_id, span_id, parent, False, flags, state, 0, start, end, {},
                     None, None, 1, None, None)
                    for name, span_id, start, end in leaves]  # fmt: skip
            r = (*r[:LEAVES], None)
        out.append(r)
    return out


def spans_in(records: Sequence[Record]) -> int:
    """How many spans ``records`` carry, leaves included (a call record four): the call
    records counted in one step, the others' leaves read one by one."""
    calls = list(map(_FIRST, records)).count(CALL)  # a name is never 0
    spans = len(records) + (CALL_SPANS - 1) * calls
    if calls == len(records):
        return spans
    return spans + sum(len(r[LEAVES]) for r in records if type(r[0]) is not int and r[LEAVES])


def to_readable(record: Record, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    """The SDK's ``ReadableSpan`` of ``record``."""
    (name, trace_id, span_id, parent_id, parent_remote, flags, trace_state, kind, start, end,
     attributes, events, links, status_code, status_message, _leaves) = record  # fmt: skip
    state = _trace_state(trace_state)
    trace_flags = TraceFlags(flags)
    parent = (SpanContext(trace_id, parent_id, bool(parent_remote), trace_flags, state)
              if parent_id else None)  # fmt: skip
    code = _CODES[status_code]
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, trace_flags, state),
        parent=parent,
        resource=resource,
        attributes=attributes,
        events=[Event(n, a, t) for n, t, a in events or ()],
        links=[
            Link(SpanContext(t, s, bool(remote), TraceFlags(f), _trace_state(ts)), a)
            for t, s, f, ts, remote, a in links or ()
        ],
        kind=_KINDS[kind],
        status=Status(code, status_message) if code is not StatusCode.UNSET else Status(code),
        start_time=start,
        end_time=end,
        instrumentation_scope=scope,
    )


def _trace_state(text: str) -> TraceState | None:
    return TraceState.from_header([text]) if text else None
