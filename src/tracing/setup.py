"""Tracing set up from the standard OpenTelemetry variables, once, at the edge.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces-only
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, and off otherwise. The
variables are read through :class:`~exai.settings.Settings`, so ``.env`` works
for them as for every other setting and ``exai config`` shows them (the
headers, which usually hold a collector's API key, masked). They keep the
meaning the OpenTelemetry specification gives them:

- ``OTEL_EXPORTER_OTLP_ENDPOINT``: the collector's base URL; spans go to
  ``<base>/v1/traces``. ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is the full URL.
- ``OTEL_EXPORTER_OTLP_HEADERS``: ``key=value`` pairs, comma-separated, values
  URL-encoded.
- ``OTEL_SERVICE_NAME``: the ``service.name`` resource attribute (``exai``).
- ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG``: the sampler, one of
  the specification's built-in names (``parentbased_always_on`` by default).

The rest (timeout, compression, certificates, the batch processor's queue and
delay: ``OTEL_EXPORTER_OTLP_TIMEOUT``, ``OTEL_BSP_*``...) is read by the SDK
itself from the environment. Export is OTLP over HTTP/protobuf, through a
:class:`~exai.tracing.export.GuardedExporter` that masks credentials and
counts failures, behind the SDK's batch processor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)

from exai.tracing import install, reset, state
from exai.tracing.export import ExportStats, GuardedExporter

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["configure", "export_stats", "headers_from", "sampler_from", "shutdown", "traces_url"]

_exporter: GuardedExporter | None = None


def traces_url(endpoint: str | None, traces_endpoint: str | None) -> str | None:
    """Where spans are posted: the traces endpoint as given, else ``<endpoint>/v1/traces``."""
    if traces_endpoint:
        return traces_endpoint
    if endpoint:
        return endpoint.rstrip("/") + "/v1/traces"
    return None


def headers_from(text: str | None) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``k1=v1,k2=v2``, values URL-encoded (W3C baggage format).

    Raises ValueError on a pair without ``=`` (a typo would otherwise send no key).
    """
    out: dict[str, str] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError("expected key=value pairs separated by commas")
        out[unquote(key.strip())] = unquote(value.strip())
    return out


def sampler_from(name: str, arg: float | None) -> Sampler:
    """The SDK sampler an ``OTEL_TRACES_SAMPLER`` name stands for."""
    rate = 1.0 if arg is None else arg
    samplers: dict[str, Callable[[], Sampler]] = {
        "always_on": lambda: ALWAYS_ON,
        "always_off": lambda: ALWAYS_OFF,
        "traceidratio": lambda: TraceIdRatioBased(rate),
        "parentbased_always_on": lambda: DEFAULT_ON,
        "parentbased_always_off": lambda: DEFAULT_OFF,
        "parentbased_traceidratio": lambda: ParentBasedTraceIdRatio(rate),
    }
    return samplers[name]()


def configure(settings: Settings, scrub: Callable[[str], str] | None = None) -> bool:
    """Turn tracing on if an endpoint is configured; True if it is now on.

    ``scrub`` masks credentials in exported strings (the edge passes the audit
    trail's :meth:`~exai.audit.scrub.Scrubber.scrub_text`).
    """
    url = traces_url(settings.otel_exporter_otlp_endpoint,
                     settings.otel_exporter_otlp_traces_endpoint)  # fmt: skip
    if url is None:
        state.content = settings.trace_content  # it also decides what error text the log gets
        return False
    secret = settings.otel_exporter_otlp_headers
    headers = headers_from(secret.get_secret_value() if secret is not None else None)
    exporter = OTLPSpanExporter(endpoint=url, headers=headers)
    provider = build_provider(
        exporter,
        service_name=settings.otel_service_name,
        sampler=sampler_from(settings.otel_traces_sampler, settings.otel_traces_sampler_arg),
        scrub=scrub,
    )
    install(provider, content=settings.trace_content)
    return True


def build_provider(
    exporter: Any,
    *,
    service_name: str = "exai",
    sampler: Sampler | None = None,
    scrub: Callable[[str], str] | None = None,
    processor: Callable[[Any], Any] = BatchSpanProcessor,
) -> TracerProvider:
    """A provider exporting through :class:`GuardedExporter` (``processor``: the batch
    processor; tests may pass the SDK's simple one to see spans as they end)."""
    global _exporter
    from exai import __version__

    guarded = GuardedExporter(exporter, scrub)
    resource = Resource.create({"service.name": service_name, "service.version": __version__})
    provider = TracerProvider(resource=resource, sampler=sampler or DEFAULT_ON)
    provider.add_span_processor(processor(guarded))
    _exporter = guarded
    return provider


def export_stats() -> ExportStats | None:
    """The counts of the exporter configured last (None: never configured)."""
    return _exporter.stats if _exporter is not None else None


def flush(timeout_s: float = 5.0) -> bool:
    provider = state.provider
    if provider is None:
        return True
    return bool(provider.force_flush(int(timeout_s * 1000)))


def shutdown() -> None:
    """Export what is queued (bounded by the exporter's timeout), then turn tracing off."""
    provider = reset()
    if provider is not None:
        provider.shutdown()
