"""The provider :func:`exai.tracing.install` takes: tracers of recorded spans, and where they go.

A :class:`SpanProvider` hands out :class:`~exai.tracing.spans.RecordingTracer`
s whose spans end into one destination:

- a :class:`~exai.tracing.link.WriterLink`: the span writer process, which
  the daemon and the shim use (:func:`exai.tracing.setup.configure`);
- a :class:`ProcessorSink`: an SDK span processor in this process, each
  record turned into the SDK's ``ReadableSpan`` first (the tests' in-memory
  exporter; anyone embedding exai with an SDK processor of their own).
"""

from __future__ import annotations

from typing import Any, Protocol

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from exai.tracing.records import Record, expand, to_readable
from exai.tracing.spans import RecordingTracer, SpanSource

__all__ = ["Destination", "ProcessorSink", "SpanProvider"]


class Destination(Protocol):
    def add(self, record: Record) -> None: ...
    def flush(self, timeout_s: float) -> bool: ...


class SpanProvider:
    def __init__(self, sampler: Sampler, destination: Any) -> None:
        self.destination = destination
        self._tracer = RecordingTracer(SpanSource(sampler, destination.add))

    def get_tracer(self, *_args: Any, **_kwargs: Any) -> RecordingTracer:
        """The one tracer (exai's spans share one instrumentation scope)."""
        return self._tracer

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.destination.flush(timeout_millis / 1000))

    def shutdown(self) -> None:
        """Stop the destination (a writer within the export timeout; see setup.shutdown)."""
        self.destination.stop()


class ProcessorSink:
    """Records as ``ReadableSpan`` s to an SDK span processor, as each span ends."""

    def __init__(self, processor: SpanProcessor, resource: Resource,
                 scope: InstrumentationScope) -> None:  # fmt: skip
        self.processor = processor
        self._resource = resource
        self._scope = scope

    def add(self, record: Record) -> None:
        for r in expand((record,)):
            self.processor.on_end(to_readable(r, self._resource, self._scope))

    def flush(self, timeout_s: float) -> bool:
        return bool(self.processor.force_flush(int(timeout_s * 1000)))

    def stop(self) -> None:
        self.processor.shutdown()
