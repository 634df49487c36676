"""W3C trace context in and out: a ``traceparent`` (and ``tracestate``) read as the
parent a span continues, and the current span's written for the next hop.

The OpenTelemetry API's own propagator does the parsing and the writing, so
what goes in and out is exactly what any OpenTelemetry service reads and writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from exai.tracing.current import span_in

__all__ = ["carrier", "extract", "extract_from", "links_to"]

_PROPAGATOR = TraceContextTextMapPropagator()


def extract(traceparent: Any, tracestate: Any = None) -> otel_context.Context | None:
    """The remote parent a ``traceparent`` names, or None if there is none or it is
    malformed (W3C: a receiver ignores a traceparent it cannot parse)."""
    if not isinstance(traceparent, str) or not traceparent:
        return None
    carrier_in = {"traceparent": traceparent}
    if isinstance(tracestate, str) and tracestate:
        carrier_in["tracestate"] = tracestate
    ctx = _PROPAGATOR.extract(carrier_in)
    if not span_in(ctx).get_span_context().is_valid:
        return None
    return ctx


def extract_from(headers: Mapping[str, Any] | None) -> otel_context.Context | None:
    """:func:`extract` from a mapping with ``traceparent``/``tracestate`` keys
    (lower-cased HTTP headers, MCP's ``_meta``)."""
    if not headers:
        return None
    return extract(headers.get("traceparent"), headers.get("tracestate"))


def links_to(headers: Mapping[str, Any] | None) -> list[Link] | None:
    """A link to the span a ``traceparent`` mapping names (a job's runs to the call
    that made the job), or None when there is none."""
    ctx = extract_from(headers)
    if ctx is None:
        return None
    return [Link(span_in(ctx).get_span_context())]


def carrier(context: otel_context.Context | None = None) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of the current span, or of ``context``'s,
    to send on; empty when there is no valid span. A ``tracestate`` over 512
    characters is left out (W3C allows a hop to drop it)."""
    out: dict[str, str] = {}
    if trace.get_current_span(context).get_span_context().is_valid:
        _PROPAGATOR.inject(out, context=context)
    if len(out.get("tracestate", "")) > 512:
        del out["tracestate"]
    return out
