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

The rest (timeout, compression, certificates, batching) are read from the
environment as the SDK reads them (:mod:`exai.tracing.variables`).

:func:`configure` starts the span writer process (:mod:`exai.tracing.writer`)
and installs a :class:`~exai.tracing.provider.SpanProvider` whose spans end
into it: a call builds its spans as plain records, and everything else
(keeping, masking, encoding, export) happens in that process.
:func:`build_provider` is the in-process form, for an SDK span processor
(the tests' in-memory exporter).

:func:`shutdown` has one deadline, the export timeout, for the hand-over and
the export together: what is queued is exported until then, what is still
queued at the deadline is dropped unsent, and what never went out is counted
and logged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from exai.logs import get_logger
from exai.tracing import install, reset, state
from exai.tracing.export import CountingProcessor, ExportStats, GuardedExporter
from exai.tracing.limits import span_limits
from exai.tracing.link import WriterLink
from exai.tracing.provider import ProcessorSink, SpanProvider
from exai.tracing.variables import (
    batching,
    export_timeout_s,
    headers_from,
    post_options,
    refuse_unapplied,
    sampler_from,
    traces_url,
)

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = [
    "StopReport",
    "build_provider",
    "configure",
    "export_stats",
    "export_timeout_s",
    "flush",
    "headers_from",
    "sampler_from",
    "shutdown",
    "traces_url",
]

log = get_logger("exai.tracing")

_DEFAULT_TIMEOUT_S: Final = 10.0  # the SDK's
_SCOPE: Final = "exai"
_stats: ExportStats | None = None
_guarded: GuardedExporter | None = None  # the in-process form's exporter
_timeout_s = _DEFAULT_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class StopReport:
    """What :func:`shutdown` did within its deadline."""

    timeout_s: float  # the one deadline, from the start of the stop
    finished: bool  # the export was done by then
    spans_exported: int
    spans_unexported: int  # ended but not delivered: failed, dropped at the deadline, queued


def _resource(service_name: str) -> Resource:
    from exai import __version__

    return Resource.create({"service.name": service_name, "service.version": __version__})


def configure(
    settings: Settings,
    scrub: Callable[[str], str] | None = None,
    environment: Mapping[str, str] | None = None,
) -> bool:
    """Turn tracing on if an endpoint is configured; True if it is now on.

    ``scrub`` masks credentials in exported strings (the edge passes the audit
    trail's :meth:`~exai.audit.scrub.Scrubber.scrub_text`; it must pickle, as it
    goes to the writer process over its pipe). ``environment`` is the writer
    process's (None: exai's worker environment, which holds no secret).
    """
    global _stats, _guarded, _timeout_s
    from exai import __version__

    url = traces_url(settings.otel_exporter_otlp_endpoint,
                     settings.otel_exporter_otlp_traces_endpoint)  # fmt: skip
    if url is None:
        state.content = settings.trace_content  # it also decides what error text the log gets
        return False
    secret = settings.otel_exporter_otlp_headers
    headers = headers_from(secret.get_secret_value() if secret is not None else None)
    refuse_unapplied()
    post = post_options(url, headers)
    batch = batching()
    config = {
        "resource": dict(_resource(settings.otel_service_name).attributes),
        "scope": (_SCOPE, __version__),
        "scrub": scrub,
        "post": asdict(post),
        "user_agent": f"exai/{__version__}",
        "batch_size": batch.batch_size,
        "delay_s": batch.delay_s,
        "max_queue": batch.max_queue,
        "keep": settings.trace_keep,
        "slow_ms": settings.trace_slow_ms,
        "keep_share": settings.trace_keep_share,
        "nice": settings.trace_writer_nice,
        "limits": asdict(span_limits()),
        "log_format": settings.log_format,
        "log_level": settings.log_level,
    }
    link = WriterLink(config, batch_size=batch.batch_size, max_queue=batch.max_queue,
                      environment=environment)  # fmt: skip
    sampler = sampler_from(settings.otel_traces_sampler, settings.otel_traces_sampler_arg)
    install(SpanProvider(sampler, link), content=settings.trace_content)
    _stats, _guarded, _timeout_s = link.stats, None, post.timeout_s
    return True


def build_provider(
    exporter: Any,
    *,
    service_name: str = "exai",
    sampler: Sampler | None = None,
    scrub: Callable[[str], str] | None = None,
    processor: Callable[[Any], Any] = BatchSpanProcessor,
    timeout_s: float = _DEFAULT_TIMEOUT_S,
) -> SpanProvider:
    """A provider exporting in this process through an SDK span processor
    (``processor``: the batch processor; tests pass the SDK's simple one to see
    spans as they end) and :class:`GuardedExporter`. ``timeout_s`` is the
    exporter's timeout, which :func:`shutdown` keeps to."""
    global _stats, _guarded, _timeout_s
    from exai import __version__

    guarded = GuardedExporter(exporter, scrub)
    counting = CountingProcessor(processor(guarded), guarded.stats)
    sink = ProcessorSink(counting, _resource(service_name),
                         InstrumentationScope(_SCOPE, __version__))  # fmt: skip
    _stats, _guarded, _timeout_s = guarded.stats, guarded, timeout_s
    return SpanProvider(sampler or DEFAULT_ON, sink)


def export_stats() -> ExportStats | None:
    """The counts of the export configured last (None: never configured)."""
    return _stats


def flush(timeout_s: float = 5.0) -> bool:
    provider = state.provider
    if provider is None:
        return True
    return bool(provider.force_flush(int(timeout_s * 1000)))


def shutdown(timeout_s: float | None = None) -> StopReport | None:
    """Turn tracing off and export what is queued, all within ``timeout_s`` (the
    exporter's timeout unless given); None if tracing was not on."""
    provider = reset()
    stats = _stats
    if provider is None or stats is None:
        return None
    limit = _timeout_s if timeout_s is None else timeout_s
    destination = provider.destination
    if isinstance(destination, WriterLink):
        finished = destination.stop(limit)
    else:
        finished = _stop_in_process(provider, limit)
    exported = stats.spans_exported
    unexported = max(0, stats.spans_ended - exported - stats.spans_discarded)
    report = StopReport(timeout_s=limit, finished=finished, spans_exported=exported,
                        spans_unexported=unexported)  # fmt: skip
    if report.spans_unexported:
        log.warning("traces not exported at stop", spans=report.spans_unexported,
                    timeout_s=limit, finished=finished)  # fmt: skip
    return report


def _stop_in_process(provider: SpanProvider, limit: float) -> bool:
    """The SDK processor's shutdown within ``limit``: batches still queued at the
    deadline fail unsent; one in flight is left to its thread."""
    guarded = _guarded
    if guarded is not None:
        guarded.refuse_after(time.monotonic() + limit)
    stopping = threading.Thread(target=provider.shutdown, name="exai-trace-stop", daemon=True)
    stopping.start()
    stopping.join(limit)
    finished = not stopping.is_alive()
    if not finished and guarded is not None:
        guarded.shutdown()  # ends the exporter's retries; the batch in flight is lost
    return finished
