"""The OpenTelemetry span limits on exai's spans: read from the SDK's variables and
applied by the span writer's encoder as the SDK applies them to its own spans (the
same attributes, events, links and dropped counts come out of both encoders)."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import SpanLimits as SdkLimits
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import DEFAULT_ON
from opentelemetry.trace import Link

from exai.tracing.limits import SpanLimits, span_limits
from exai.tracing.otlp import Encoder
from exai.tracing.spans import RecordingTracer, SpanSource
from exai.tracing.variables import refuse_unapplied
from tests.cli.helpers import clean_env, run_exai

ATTRIBUTES = {"c": 3, "d": "dropped", "e": True, "a": "abcdef", "b": ("long", "x")}
ENV = {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "2", "OTEL_SPAN_EVENT_COUNT_LIMIT": "1",
       "OTEL_SPAN_LINK_COUNT_LIMIT": "1", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "3",
       "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "1"}  # fmt: skip


def _shape(tracer, other):
    """A span with five attributes, three events and two links, however made."""
    links = [Link(other, {"why": "job"}), Link(other, {"n": 2})]
    span = tracer.start_span("call", attributes=ATTRIBUTES, links=links)
    for n in range(3):
        span.add_event(f"event {n}", {"n": n, "extra": "yes"})
    span.end()


def _parsed(body: bytes):
    return ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans


def test_the_writer_applies_the_limits_the_sdk_applies():
    limits = span_limits(ENV)
    assert limits == SpanLimits(attributes=2, events=1, links=1, event_attributes=1,
                                link_attributes=128, value_length=3)  # fmt: skip
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    seed = tracer.start_span("seed")
    seed.end()
    _shape(tracer, seed.get_span_context())
    encoder = Encoder({"service.name": "exai"}, ("exai", "1"))
    (ours,) = _parsed(encoder.request([encoder.span(*limits.apply(records[1]))]))

    exporter = InMemorySpanExporter()
    sdk = TracerProvider(span_limits=SdkLimits(max_span_attributes=2, max_events=1, max_links=1,
                         max_event_attributes=1, max_attribute_length=3))  # fmt: skip
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    sdk_tracer = sdk.get_tracer("t")
    other = sdk_tracer.start_span("seed")
    other.end()
    _shape(sdk_tracer, other.get_span_context())
    (theirs,) = (
        encode_spans([exporter.get_finished_spans()[1]]).resource_spans[0].scope_spans[0].spans
    )

    assert list(ours.attributes) == list(theirs.attributes)  # the last two, cut to 3
    assert [a.key for a in ours.attributes] == ["a", "b"]
    assert ours.attributes[0].value.string_value == "abc"
    assert [v.string_value for v in ours.attributes[1].value.array_value.values] == ["lon", "x"]
    assert (ours.dropped_attributes_count, ours.dropped_events_count, ours.dropped_links_count) == (
        theirs.dropped_attributes_count, theirs.dropped_events_count, theirs.dropped_links_count,
    ) == (3, 2, 1)  # fmt: skip
    assert [(e.name, list(e.attributes)) for e in ours.events] == [
        (e.name, list(e.attributes)) for e in theirs.events
    ]  # the last event, its last attribute
    assert [list(link.attributes) for link in ours.links] == [
        list(link.attributes) for link in theirs.links
    ]


def test_a_span_within_the_limits_is_encoded_as_it_was():
    records: list = []
    tracer = RecordingTracer(SpanSource(DEFAULT_ON, records.append))
    tracer.start_span("call", attributes={"a": "x" * 500}).end()
    record, dropped = span_limits({}).apply(records[0])
    assert record is records[0] and dropped == (0, 0, 0)


@pytest.mark.parametrize(
    "name", ["OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"]
)
def test_a_limit_that_is_no_whole_number_is_refused_by_name(name):
    with pytest.raises(ValueError, match=name):
        span_limits({name: "-1"})


@pytest.mark.parametrize(("name", "value"), [
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
    ("OTEL_TRACES_EXPORTER", "console"),
    ("OTEL_PYTHON_EXPORTER_OTLP_CREDENTIAL_PROVIDER", "my_module"),
])  # fmt: skip
def test_a_variable_the_writer_would_not_apply_stops_the_start_by_name(name, value):
    refuse_unapplied(
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_TRACES_EXPORTER": "otlp"}
    )
    with pytest.raises(ValueError, match=name):
        refuse_unapplied({name: value})


@pytest.mark.parametrize("command", ["serve", "shim"])
async def test_serve_and_the_shim_refuse_it_in_one_line(tmp_path, command):
    env = {**clean_env(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}  # fmt: skip
    ran = await run_exai(command, env=env, cwd=tmp_path)
    assert ran.code == 2 and "Traceback" not in ran.err
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='grpc' is not applied" in ran.err
