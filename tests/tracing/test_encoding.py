"""exai's spans: what the OpenTelemetry API sees of them, and the OTLP bytes exai's
encoder writes for them, against what the SDK's own encoder writes for the same spans."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, DEFAULT_ON, TraceIdRatioBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from exai import tracing
from exai.tracing.otlp import Encoder
from exai.tracing.records import ATTRIBUTES, STATUS_CODE, expand, to_readable
from exai.tracing.spans import Leaf, RecordingTracer, SpanSource

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _spans(sampler=DEFAULT_ON):
    """Spans of every shape a call makes: under a caller's span with a tracestate,
    a child with an event, a link and an error, a root of its own."""
    records: list = []
    tracer = RecordingTracer(SpanSource(sampler, records.append))
    parent = tracing.extract(CALLER, "vendor=1,other=two")
    face = tracer.start_span("call_tool echo", context=parent, kind=SpanKind.SERVER, attributes={
        "s": "text", "yes": True, "no": False, "n": 3, "neg": -7, "zero": 0, "f": 1.5,
        "empty": "", "list": ("a", "b"), "nums": [1, 2], "none": None,
    })  # fmt: skip
    inside = trace.set_span_in_context(face)
    step = tracer.start_span("turn", context=inside,
                             links=[Link(face.get_span_context(), {"why": "job"})])  # fmt: skip
    step.add_event("retry", {"exai.attempt": 2, "error.type": "RATE_LIMITED"})
    step.set_status(Status(StatusCode.ERROR, "RATE_LIMITED (kimi, HTTP 429)"))
    step.end()
    face.set_status(Status(StatusCode.OK))
    face.end()
    alone = tracer.start_span("job chat", kind=SpanKind.CLIENT)
    alone.end()
    return records, face, step


def test_the_encoder_writes_what_the_sdks_encoder_writes():
    records, _, _ = _spans()
    resource = Resource.create({"service.name": "exai", "service.version": "1.2.3"})
    scope = InstrumentationScope("exai", "1.2.3")
    sdk = encode_spans([to_readable(r, resource, scope) for r in records])
    encoder = Encoder(dict(resource.attributes), ("exai", "1.2.3"))
    ours = ExportTraceServiceRequest.FromString(encoder.request(encoder.span(r) for r in records))
    assert len(ours.resource_spans[0].scope_spans[0].spans) == 3
    assert ours == sdk


def test_a_leaf_is_encoded_as_the_sdks_encoder_writes_the_span_it_stands_for():
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    face = tracer.start_span(
        "call_tool echo",
        context=tracing.extract(CALLER),
        kind=SpanKind.SERVER,
        attributes={"exai.request.id": "r1"},
    )
    Leaf(face, "admission").end_ok()
    face.end()
    expanded = expand(records)
    assert [r[0] for r in expanded] == ["admission", "call_tool echo"]
    resource = Resource.create({"service.name": "exai"})
    scope = InstrumentationScope("exai", "1.2.3")
    sdk = encode_spans([to_readable(r, resource, scope) for r in expanded])
    encoder = Encoder(dict(resource.attributes), ("exai", "1.2.3"))
    assert (
        ExportTraceServiceRequest.FromString(encoder.request(encoder.span(r) for r in expanded))
        == sdk
    )


def test_a_record_with_leaves_is_encoded_as_its_expanded_spans_are():
    """The writer encodes a record's leaves from it, without expanding it first: the
    same bytes, with and without the caller's tracestate, leaves before their parent."""
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    for context in (tracing.extract(CALLER, "vendor=1"), None):
        face = tracer.start_span("call_tool echo", context=context, kind=SpanKind.SERVER,
                                 attributes={"exai.request.id": "r1"})  # fmt: skip
        Leaf(face, "admission").end_ok()
        Leaf(face, "audit").end_ok()
        face.end()
    encoder = Encoder({"service.name": "exai"}, ("exai", "1"), text=str.upper)
    for record in records:
        assert encoder.span(record) == b"".join(encoder.span(r) for r in expand([record]))
    parsed = ExportTraceServiceRequest.FromString(encoder.request(encoder.span(r) for r in records))
    assert [s.name for s in parsed.resource_spans[0].scope_spans[0].spans] == [
        "ADMISSION", "AUDIT", "CALL_TOOL ECHO"] * 2  # fmt: skip


def test_every_string_passes_the_scrubber_on_its_way():
    records, _, _ = _spans()
    encoder = Encoder({"service.name": "exai"}, ("exai", "1"), text=str.upper)
    ours = ExportTraceServiceRequest.FromString(encoder.request(encoder.span(r) for r in records))
    step, face, _ = ours.resource_spans[0].scope_spans[0].spans  # in the order they ended
    assert {a.key: a.value.string_value for a in face.attributes}["s"] == "TEXT"
    assert step.status.message == "RATE_LIMITED (KIMI, HTTP 429)"
    assert step.events[0].attributes[1].value.string_value == "RATE_LIMITED"


def test_spans_keep_the_callers_trace_and_the_apis_semantics():
    records, face, step = _spans()
    ctx = face.get_span_context()
    assert f"{ctx.trace_id:032x}" == CALLER[3:35] and ctx.trace_flags.sampled
    step_record, face_record = records[0], records[1]
    assert face_record[3] == int(CALLER[36:52], 16) and face_record[4] is True  # remote parent
    assert step_record[3] == ctx.span_id and step_record[4] is False
    # The caller's tracestate goes on with the trace, and out in the traceparent.
    carried = tracing.carrier(trace.set_span_in_context(step))
    assert carried["traceparent"].split("-")[1] == CALLER[3:35]
    assert carried["tracestate"] == "vendor=1,other=two"
    # OK is final, as in the SDK; an ended span takes no more changes.
    face.set_status(Status(StatusCode.ERROR, "late"))
    face.set_attribute("late", "x")
    assert records[1][STATUS_CODE] == StatusCode.OK.value and "late" not in records[1][ATTRIBUTES]
    # None, and values OpenTelemetry refuses, are left out.
    assert "none" not in records[1][10] and records[1][10]["list"] == ("a", "b")
    # A trace exai starts has an id of its own (see test_ids), flagged random as the
    # W3C level 2 says.
    root = records[2]
    assert root[3] == 0 and root[5] == 0x03


def test_the_sampler_decides_as_the_sdks_would():
    records: list = []
    never = RecordingTracer(SpanSource(ALWAYS_OFF, records.append))
    sp = never.start_span("x")
    assert not sp.is_recording() and not sp.get_span_context().trace_flags.sampled
    sp.end()
    half = RecordingTracer(SpanSource(TraceIdRatioBased(0.5), records.append))
    kept = 0
    for _ in range(400):
        sp = half.start_span("y")
        kept += sp.is_recording()
        sp.end()
    assert len(records) == kept and 100 < kept < 300
    # A child of a sampled caller is sampled under the default sampler, whatever its id.
    default = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    child = default.start_span("z", context=tracing.extract(CALLER))
    assert child.is_recording()
    unsampled = default.start_span("z", context=tracing.extract(CALLER[:-2] + "00"))
    assert not unsampled.is_recording()


def _both_encodings(records: list) -> tuple[ExportTraceServiceRequest, ExportTraceServiceRequest]:
    """``records`` encoded by exai's encoder and by the SDK's, each decoded."""
    resource = Resource.create({"service.name": "exai"})
    scope = InstrumentationScope("exai", "1")
    sdk = encode_spans([to_readable(r, resource, scope) for r in records])
    encoder = Encoder(dict(resource.attributes), ("exai", "1"))
    ours = ExportTraceServiceRequest.FromString(encoder.request(encoder.span(r) for r in records))
    return ours, sdk


def test_equal_numbers_of_different_types_under_one_key_keep_their_own_encodings():
    # The encoder caches a number's KeyValue by its type as well: True, 1 and 1.0 are
    # equal as dict keys and encoded differently.
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    for value in (True, 1, 1.0, 1, True, 1.0):
        tracer.start_span("turn", attributes={"v": value}).end()
    ours, sdk = _both_encodings(records)
    assert ours == sdk
    values = [s.attributes[0].value for s in ours.resource_spans[0].scope_spans[0].spans]
    kinds = ["bool_value", "int_value", "double_value"] * 2
    assert [v.WhichOneof("value") for v in values] == [kinds[i] for i in (0, 1, 2, 1, 0, 2)]


def test_a_spans_attributes_are_its_own_copy_of_what_the_caller_gave():
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    given = {"s": "text", "n": 3}
    sp = tracer.start_span("turn", attributes=given)
    given["s"] = "changed"
    given["later"] = True
    sp.end()
    assert records[0][ATTRIBUTES] == {"s": "text", "n": 3}


def test_spans_of_every_length_class_are_encoded_as_the_sdks_encoder_writes_them():
    # A span's length is written in one byte under 128, two under 16,384, more above.
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    for size in (0, 200, 20_000, 70_000):
        tracer.start_span("turn", attributes={"v": "x" * size} if size else None).end()
    ours, sdk = _both_encodings(records)
    assert ours == sdk
    assert len(ours.resource_spans[0].scope_spans[0].spans) == 4


def test_a_call_record_is_encoded_as_the_sdks_encoder_writes_its_four_spans():
    """Encoder.call writes a call record (a face's span nested into its call's) as the
    SDK's encoder writes the spans it stands for, in expand's order, under a
    caller's tracestate and without one."""
    from exai.tracing.records import CALL

    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    for context in (tracing.extract(CALLER, "vendor=1"), None):
        attributes = {"exai.face": "websocket", "exai.request.id": "r1", "n": 3, "f": 1.5}
        face = tracer.server("call_tool echo", context, attributes)
        assert isinstance(face, tracing.RecordedSpan)
        Leaf(face, "admission").end_ok()
        face.nest("execute_tool echo", {"gen_ai.tool.name": "echo", "exai.timeout_s": 30.0})
        Leaf(face, "audit").end_ok()
        face.end_ok()
    assert [r[0] for r in records] == [CALL, CALL]
    resource = Resource.create({"service.name": "exai"})
    scope = InstrumentationScope("exai", "1.2.3")
    encoder = Encoder(dict(resource.attributes), ("exai", "1.2.3"))
    for record in records:
        expanded = expand([record])
        assert encoder.call(record) == b"".join(encoder.span(r) for r in expanded)
        sdk = encode_spans([to_readable(r, resource, scope) for r in expanded])
        ours = ExportTraceServiceRequest.FromString(encoder.request([encoder.call(record)]))
        assert [s.name for s in ours.resource_spans[0].scope_spans[0].spans] == [
            "audit", "execute_tool echo", "admission", "call_tool echo"]  # fmt: skip
        assert ours == sdk
