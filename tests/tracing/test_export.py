"""Export: set up from the standard variables, through the real OTLP/HTTP exporter and
the SDK's batch processor; a dead collector loses spans, never calls; credentials
are masked on the way out."""

from __future__ import annotations

import socket

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    DEFAULT_ON,
    ParentBasedTraceIdRatio,
    TraceIdRatioBased,
)

from exai import tracing
from exai.audit.scrub import Scrubber
from exai.settings import SettingsError, load_settings
from exai.tracing import setup
from tests.conftest import make_settings, running_daemon


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens


async def test_a_dead_collector_fails_no_call_and_its_failures_are_counted(
    tmp_path, client_factory, monkeypatch
):
    # The SDK reads these itself: a short export timeout and a quick batch.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    dead = f"http://127.0.0.1:{_closed_port()}"
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=dead,
                             otel_traces_sampler="always_on")  # fmt: skip
    assert setup.configure(settings)
    try:
        async with running_daemon(settings) as daemon:
            client = await client_factory(daemon)
            results = [await client.call("echo", {"text": f"n{i}"}) for i in range(30)]
            assert all(r.error is None and r.outputs[0].text == f"n{i}"
                       for i, r in enumerate(results))  # fmt: skip
            assert all(len(r.metadata.model_extra["trace_id"]) == 32 for r in results)
            assert setup.flush(timeout_s=30) is not None
            stats = setup.export_stats()
            assert stats is not None
            assert stats.spans_exported == 0 and stats.batches_failed >= 1
            assert stats.spans_failed >= 30 * 3  # face, admission, execute_tool, audit per call
            metrics = daemon.core.metrics.render().decode()
            assert "exai_trace_export_failures " in metrics
            assert daemon.core.stats()["tracing"]["batches_failed"] == stats.batches_failed
            # Still serving after the failures.
            later = await client.call("echo", {"text": "still here"})
            assert later.error is None and later.outputs[0].text == "still here"
    finally:
        setup.shutdown()
    assert tracing.state.tracer is None


def test_tracing_is_off_without_an_endpoint(tmp_path):
    assert setup.configure(make_settings(tmp_path)) is False
    assert tracing.state.tracer is None


def test_the_exporter_masks_credentials_in_every_string():
    secret = "glm-key-for-the-scrub-test-0123456789"
    inner = InMemorySpanExporter()
    provider = setup.build_provider(inner, scrub=Scrubber([secret]).scrub_text,
                                    processor=SimpleSpanProcessor)  # fmt: skip
    tracing.install(provider)
    try:
        with tracing.span(
            "provider",
            attributes={
                "url": f"https://u:{secret}@host/x",
                "auth": f"Bearer {secret}",
                "list": (f"a {secret}", "b"),
            },
        ) as sp:
            tracing.event("retry", {"error.message": f"bad key {secret}"})
            tracing.fail(sp, RuntimeError(f"upstream said {secret}"))
    finally:
        tracing.reset()
        provider.shutdown()
    (exported,) = inner.get_finished_spans()
    everything = repr(dict(exported.attributes)) + repr([dict(e.attributes) for e in
                                                         exported.events])  # fmt: skip
    everything += exported.status.description or ""
    assert secret not in everything
    assert "****" in exported.attributes["auth"] and exported.attributes["list"][1] == "b"


def test_standard_variables_mean_what_the_specification_says():
    assert setup.traces_url("http://c:4318/", None) == "http://c:4318/v1/traces"
    assert setup.traces_url("http://c:4318", "http://t/v1/x") == "http://t/v1/x"
    assert setup.traces_url(None, None) is None
    assert setup.headers_from("api_key=a%3Db,x-team = blue") == {"api_key": "a=b", "x-team": "blue"}
    assert setup.headers_from("") == {}
    assert setup.sampler_from("parentbased_always_on", None) is DEFAULT_ON
    assert setup.sampler_from("always_off", None) is ALWAYS_OFF
    ratio = setup.sampler_from("traceidratio", 0.25)
    assert isinstance(ratio, TraceIdRatioBased) and ratio.rate == 0.25
    assert isinstance(setup.sampler_from("parentbased_traceidratio", 0.5), ParentBasedTraceIdRatio)


def test_bad_tracing_variables_stop_start_up_by_name(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key-without-equals-sk-123456")
    with pytest.raises(SettingsError) as bad:
        load_settings(_env_file=None)
    assert "OTEL_EXPORTER_OTLP_HEADERS" in str(bad.value)
    assert "sk-123456" not in str(bad.value)  # a header is a credential: never echoed
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "sometimes")
    with pytest.raises(SettingsError, match="OTEL_TRACES_SAMPLER"):
        load_settings(_env_file=None)


def test_headers_are_masked_by_exai_config(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abcdef123456")
    masked = load_settings(_env_file=None).masked()
    assert masked["OTEL_EXPORTER_OTLP_HEADERS"] == "****"
