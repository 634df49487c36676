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

The rest (compression, certificates, the batch processor's queue and delay:
``OTEL_EXPORTER_OTLP_COMPRESSION``, ``OTEL_BSP_*``...) is read by the SDK
itself from the environment. The export timeout
(``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else ``OTEL_EXPORTER_OTLP_TIMEOUT``,
seconds, 10 by default) is read here, as the SDK reads it, and handed to the
exporter, because :func:`shutdown` keeps to it too. Export is OTLP over
HTTP/protobuf, through a :class:`~exai.tracing.export.GuardedExporter` that
masks credentials and counts failures, behind the SDK's batch processor.

:func:`shutdown` has one deadline, the export timeout, for the processor and
the exporter together: batches still queued at the deadline are dropped
unsent, a batch still in flight is left to its thread (a daemon thread, gone
with the process), and what never went out is counted and logged.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
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

from exai.logs import get_logger
from exai.tracing import install, reset, state
from exai.tracing.export import CountingProcessor, ExportStats, GuardedExporter

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = [
    "StopReport",
    "configure",
    "export_stats",
    "export_timeout_s",
    "headers_from",
    "sampler_from",
    "shutdown",
    "traces_url",
]

log = get_logger("exai.tracing")

_DEFAULT_TIMEOUT_S: Final = 10.0  # the SDK's
_exporter: GuardedExporter | None = None
_timeout_s = _DEFAULT_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class StopReport:
    """What :func:`shutdown` did within its deadline."""

    timeout_s: float  # the one deadline, from the start of the stop
    finished: bool  # the processor and the exporter were done by then
    spans_exported: int
    spans_unexported: int  # ended but not delivered: failed, dropped at the deadline, queued


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


def export_timeout_s(environ: Any = os.environ) -> float:
    """The exporter's timeout in seconds, from the variables the SDK reads, as it reads them."""
    raw = environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or environ.get(
        "OTEL_EXPORTER_OTLP_TIMEOUT"
    )
    try:
        value = float(raw) if raw else _DEFAULT_TIMEOUT_S
    except ValueError:
        return _DEFAULT_TIMEOUT_S
    return value if value > 0 else _DEFAULT_TIMEOUT_S


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
    timeout_s = export_timeout_s()
    exporter = OTLPSpanExporter(endpoint=url, headers=headers, timeout=timeout_s)
    provider = build_provider(
        exporter,
        service_name=settings.otel_service_name,
        sampler=sampler_from(settings.otel_traces_sampler, settings.otel_traces_sampler_arg),
        scrub=scrub,
        timeout_s=timeout_s,
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
    timeout_s: float = _DEFAULT_TIMEOUT_S,
) -> TracerProvider:
    """A provider exporting through :class:`GuardedExporter` (``processor``: the batch
    processor; tests may pass the SDK's simple one to see spans as they end).
    ``timeout_s`` is the exporter's timeout, which :func:`shutdown` keeps to."""
    global _exporter, _timeout_s
    from exai import __version__

    guarded = GuardedExporter(exporter, scrub)
    resource = Resource.create({"service.name": service_name, "service.version": __version__})
    provider = TracerProvider(resource=resource, sampler=sampler or DEFAULT_ON)
    provider.add_span_processor(CountingProcessor(processor(guarded), guarded.stats))
    _exporter, _timeout_s = guarded, timeout_s
    return provider


def export_stats() -> ExportStats | None:
    """The counts of the exporter configured last (None: never configured)."""
    return _exporter.stats if _exporter is not None else None


def flush(timeout_s: float = 5.0) -> bool:
    provider = state.provider
    if provider is None:
        return True
    return bool(provider.force_flush(int(timeout_s * 1000)))


def shutdown(timeout_s: float | None = None) -> StopReport | None:
    """Turn tracing off and export what is queued, all within ``timeout_s`` (the
    exporter's timeout unless given); None if tracing was not on."""
    provider = reset()
    guarded = _exporter
    if provider is None or guarded is None:
        return None
    limit = _timeout_s if timeout_s is None else timeout_s
    guarded.refuse_after(time.monotonic() + limit)
    stopping = threading.Thread(target=provider.shutdown, name="exai-trace-stop", daemon=True)
    stopping.start()
    stopping.join(limit)
    finished = not stopping.is_alive()
    if not finished:
        guarded.shutdown()  # ends the exporter's retries; the batch in flight is lost
    exported = guarded.stats.spans_exported
    unexported = max(0, guarded.stats.spans_ended - exported)
    report = StopReport(timeout_s=limit, finished=finished, spans_exported=exported,
                        spans_unexported=unexported)  # fmt: skip
    if report.spans_unexported:
        log.warning("traces not exported at stop", spans=report.spans_unexported,
                    timeout_s=limit, finished=finished)  # fmt: skip
    return report
