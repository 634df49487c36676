"""Counting what was exported, and scrubbing for an SDK exporter in this process.

:class:`ExportStats` holds the counts ``/metrics`` and ``exai status`` show;
the span writer process's link keeps them for the daemon
(:mod:`exai.tracing.link`), where masking happens in that process.

:class:`GuardedExporter` wraps an SDK span exporter for spans exported in
this process (:func:`exai.tracing.setup.build_provider`: the tests'
in-memory exporter, or an SDK processor of an embedder's). It runs on the
processor's thread, and for every span it sends

- masks credentials in every string the span carries (attributes, event
  attributes, the status message), with the scrubber the edge hands in: the
  audit trail's, so a trace masks what an audit event masks;
- counts what happened: spans exported, spans and batches that failed (a dead
  collector shows up here and in ``/metrics``, and loses spans, never calls);
- after :meth:`GuardedExporter.refuse_after`'s deadline, fails every batch at
  once without sending it, so a stop keeps to one deadline however many
  batches are still queued.

:class:`CountingProcessor` counts the spans that ended (sampled), so a stop can
say how many never went out.

Prompt and completion text are kept off spans where they are made (see
``exai.tracing.state.content``), not filtered here.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from exai.logs import get_logger

__all__ = ["CountingProcessor", "ExportStats", "GuardedExporter", "worth_logging"]

log = get_logger("exai.tracing")

ScrubText = Callable[[str], str]


class ExportStats:
    """Counts kept by the exporter's thread and read by /metrics (ints: no lock needed to read)."""

    def __init__(self) -> None:
        self.spans_ended = 0  # sampled spans handed to the processor
        self.spans_exported = 0
        self.spans_failed = 0
        self.batches_failed = 0
        self.spans_dropped = 0  # of the failed: dropped unsent, a queue being full
        self.spans_discarded = 0  # not kept by tail-based keeping: not a loss

    def as_dict(self) -> dict[str, int]:
        return {"spans_ended": self.spans_ended, "spans_exported": self.spans_exported,
                "spans_failed": self.spans_failed, "batches_failed": self.batches_failed,
                "spans_dropped": self.spans_dropped,
                "spans_discarded": self.spans_discarded}  # fmt: skip


class GuardedExporter(SpanExporter):
    def __init__(self, inner: SpanExporter, scrub: ScrubText | None = None) -> None:
        self.inner = inner
        # Most strings on spans repeat (tool names, principals, session ids): each is
        # masked once. Only the processor's one thread calls this.
        self.scrub = functools.lru_cache(maxsize=4096)(scrub) if scrub is not None else None
        self.stats = ExportStats()
        self._lock = threading.Lock()
        self._deadline: float | None = None  # time.monotonic(); None: no stop under way
        self._closed = False

    def refuse_after(self, deadline: float) -> None:
        """From ``deadline`` (``time.monotonic()``) on, fail every batch unsent."""
        self._deadline = deadline

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        deadline = self._deadline
        if deadline is not None and time.monotonic() >= deadline:
            batch: list[ReadableSpan] = list(spans)
            result = SpanExportResult.FAILURE
        else:
            batch = [self._scrubbed(s) for s in spans] if self.scrub is not None else list(spans)
            try:
                result = self.inner.export(batch)
            except Exception as exc:  # an exporter bug must not kill the processor's thread
                log.warning("trace export raised", error=repr(exc))
                result = SpanExportResult.FAILURE
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.stats.spans_exported += len(batch)
            else:
                self.stats.spans_failed += len(batch)
                self.stats.batches_failed += 1
                failed = self.stats.batches_failed
        if result is not SpanExportResult.SUCCESS and worth_logging(failed):
            log.warning("traces could not be exported; calls are not affected",
                        spans=len(batch), batches_failed=failed)  # fmt: skip
        return result

    def shutdown(self) -> None:
        """Shut the inner exporter down once (a stop that gave up on the processor
        does it at its deadline, and the processor again when it gets there)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    # --- scrubbing ----------------------------------------------------------------

    def _scrubbed(self, sp: ReadableSpan) -> ReadableSpan:
        """``sp`` with its strings masked; ``sp`` itself when nothing needed masking,
        which is almost always (so most spans are not copied)."""
        attributes = self._attrs(sp.attributes)
        events = [(e, self._attrs(e.attributes)) for e in sp.events]
        status = sp.status
        description = status.description if status is not None else None
        masked = self._text(description) if description else description
        if attributes is None and masked == description and all(a is None for _, a in events):
            return sp
        if masked != description:
            status = Status(status.status_code, masked)
        return ReadableSpan(
            name=sp.name,
            context=sp.context,
            parent=sp.parent,
            resource=sp.resource,
            attributes=attributes if attributes is not None else sp.attributes,
            events=[
                Event(e.name, a if a is not None else e.attributes, e.timestamp) for e, a in events
            ],
            links=sp.links,
            kind=sp.kind,
            status=status,
            start_time=sp.start_time,
            end_time=sp.end_time,
            instrumentation_scope=sp.instrumentation_scope,
        )

    def _attrs(self, attributes: Any) -> dict[str, Any] | None:
        """The attributes with their strings masked, or None if none changed."""
        out: dict[str, Any] | None = None
        for key, value in (attributes or {}).items():
            if isinstance(value, str):
                masked: Any = self._text(value)
            elif isinstance(value, tuple | list) and any(isinstance(v, str) for v in value):
                masked = tuple(self._text(v) if isinstance(v, str) else v for v in value)
                masked = value if tuple(value) == masked else masked
            else:
                continue
            if masked != value:
                if out is None:
                    out = dict(attributes)
                out[key] = masked
        return out

    def _text(self, text: str) -> str:
        assert self.scrub is not None
        return self.scrub(text)


class CountingProcessor(SpanProcessor):
    """The batch processor, counting the spans handed to it in ``stats.spans_ended``."""

    def __init__(self, inner: SpanProcessor, stats: ExportStats) -> None:
        self.inner = inner
        self.stats = stats
        self._lock = threading.Lock()  # spans may end on any thread

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            with self._lock:
                self.stats.spans_ended += 1
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def worth_logging(failures: int) -> bool:
    """The first failure, then every hundredth: a dead collector must not flood the log."""
    return failures == 1 or failures % 100 == 0
