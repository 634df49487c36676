"""Traces: where spans go and what they may carry (docs/observability.md).

The standard OpenTelemetry variables keep their names; they are read here, rather
than by the SDK from the process environment, so ``.env`` works for them as for
every other setting and ``exai config`` masks the collector's headers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, SecretStr, field_validator

from exai.settings.fields import group

__all__ = ["TracingSettings"]

_tracing = group("tracing")


class TracingSettings(BaseModel):
    otel_exporter_otlp_endpoint: str | None = _tracing(
        None,
        "OTLP/HTTP collector base URL (spans go to <url>/v1/traces), e.g. "
        "http://127.0.0.1:6006 for Phoenix; empty: tracing off.",
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"),
    )
    otel_exporter_otlp_traces_endpoint: str | None = _tracing(
        None, "Full URL for traces, instead of the base URL's /v1/traces.",
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    )  # fmt: skip
    otel_exporter_otlp_headers: SecretStr | None = _tracing(
        None, "Headers sent to the collector: key=value,... (values URL-encoded).",
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_HEADERS"),
    )  # fmt: skip
    otel_service_name: str = _tracing(
        "exai", "service.name of exai's spans.", validation_alias=AliasChoices("OTEL_SERVICE_NAME")
    )
    otel_traces_sampler: Literal[
        "always_on", "always_off", "traceidratio",
        "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
    ] = _tracing(
        "parentbased_always_on", "Which calls are traced (OpenTelemetry's sampler names).",
        validation_alias=AliasChoices("OTEL_TRACES_SAMPLER"),
    )  # fmt: skip
    otel_traces_sampler_arg: float | None = _tracing(
        None, "The ratio of the traceidratio samplers (empty: 1.0).",
        validation_alias=AliasChoices("OTEL_TRACES_SAMPLER_ARG"), ge=0, le=1,
    )  # fmt: skip
    trace_content: bool = _tracing(
        False,
        "Put prompt and completion text on spans (gen_ai.input.messages, "
        "gen_ai.output.messages). Off: spans carry sizes, models and tokens only.",
    )
    trace_keep: Literal["all", "tail"] = _tracing(
        "all",
        "Which sampled traces are exported: all, or tail (every trace with a failed span or "
        "a call slower than EXAI_TRACE_SLOW_MS, and EXAI_TRACE_KEEP_SHARE of the rest, "
        "decided when the call's span ends).",
    )
    trace_slow_ms: float = _tracing(
        1000.0, "With EXAI_TRACE_KEEP=tail: a call at least this slow keeps its whole trace.",
        ge=0,
    )  # fmt: skip
    trace_keep_share: float = _tracing(
        0.1, "With EXAI_TRACE_KEEP=tail: the share of the other traces kept (by trace id).",
        ge=0, le=1,
    )  # fmt: skip
    trace_writer_nice: int = _tracing(
        10, "CPU priority the span writer process gives up (a nice increment, 0-19): when "
        "calls and the writer want the same core, calls get it and the writer catches up "
        "after. 0: the writer competes as an equal.", ge=0, le=19,
    )  # fmt: skip

    trace_url: str = _tracing(
        "",
        "A link to one trace in your tracing UI, {trace_id} where its id goes (Phoenix: "
        "http://127.0.0.1:6006/projects/default/traces/{trace_id}); the console links each "
        "turn's trace there. Empty: the console shows the trace id as text.",
    )

    @field_validator("trace_url")
    @classmethod
    def _trace_url(cls, value: str) -> str:
        if value and (not value.startswith(("http://", "https://")) or "{trace_id}" not in value):
            raise ValueError("expected an http(s) URL with {trace_id} where the id goes")
        return value

    @field_validator("otel_exporter_otlp_headers")
    @classmethod
    def _otlp_headers(cls, value: SecretStr | None) -> SecretStr | None:
        # The format exai.tracing.setup.headers_from reads; the message never echoes
        # the value, which is usually a collector's API key.
        pairs = value.get_secret_value().split(",") if value is not None else []
        for pair in pairs:
            key, sep, _ = pair.partition("=")
            if pair.strip() and (not sep or not key.strip()):
                raise ValueError("expected key=value pairs separated by commas")
        return value
