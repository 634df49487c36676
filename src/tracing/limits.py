"""The OpenTelemetry span limits, read and applied as the SDK applies them.

exai's spans are plain records (:mod:`exai.tracing.records`) that the span
writer encodes itself, so the SDK's ``SpanLimits`` never sees them; the limits
are applied here instead, in the writer, with the SDK's variables, defaults and
rules (``opentelemetry.sdk.trace.SpanLimits``):

- ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``, else ``OTEL_ATTRIBUTE_COUNT_LIMIT`` (128):
  a span keeps its last attributes (the SDK's bounded mapping lets the oldest
  go), the others are counted as dropped;
- ``OTEL_SPAN_EVENT_COUNT_LIMIT`` and ``OTEL_SPAN_LINK_COUNT_LIMIT`` (128): a
  span keeps its last events and links, likewise;
- ``OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT`` and ``OTEL_LINK_ATTRIBUTE_COUNT_LIMIT``,
  else ``OTEL_ATTRIBUTE_COUNT_LIMIT`` (128): an event's or a link's attributes;
- ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``, else
  ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (none): a string value, or each string
  of a sequence, is cut to that many characters.

A value that is not a whole number of at least 0 is refused at start, naming
the variable, where the SDK would log it and go on: exai applies what it
accepts. What a span dropped is in its OTLP ``dropped_*_count`` fields.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exai.tracing.records import ATTRIBUTES, EVENTS, LINKS, Record

__all__ = ["SpanLimits", "span_limits"]

_DEFAULT_COUNT = 128


@dataclass(frozen=True, slots=True)
class SpanLimits:
    attributes: int = _DEFAULT_COUNT
    events: int = _DEFAULT_COUNT
    links: int = _DEFAULT_COUNT
    event_attributes: int = _DEFAULT_COUNT
    link_attributes: int = _DEFAULT_COUNT
    value_length: int | None = None

    def apply(self, r: Record) -> tuple[Record, tuple[int, int, int]]:
        """The record within the limits, and how many attributes, events and links it
        dropped."""
        attributes, events, links = r[ATTRIBUTES], r[EVENTS], r[LINKS]
        if (
            len(attributes) <= self.attributes
            and self.value_length is None
            and not (events or links)
        ):
            return r, (0, 0, 0)
        kept, dropped_attributes = self._attributes(attributes, self.attributes)
        dropped_events = dropped_links = 0
        if events:
            dropped_events = max(0, len(events) - self.events)
            events = [(name, ts, self._attributes(attrs or {}, self.event_attributes)[0])
                      for name, ts, attrs in events[dropped_events:]]  # fmt: skip
        if links:
            dropped_links = max(0, len(links) - self.links)
            links = [(*link[:5], self._attributes(link[5] or {}, self.link_attributes)[0])
                     for link in links[dropped_links:]]  # fmt: skip
        out = list(r)
        out[ATTRIBUTES], out[EVENTS], out[LINKS] = kept, events, links
        return tuple(out), (dropped_attributes, dropped_events, dropped_links)

    def _attributes(self, attributes: Mapping[str, Any], limit: int) -> tuple[dict[str, Any], int]:
        items = list(attributes.items())
        dropped = max(0, len(items) - limit)
        kept = dict(items[dropped:])
        if self.value_length is not None:
            kept = {k: self._cut(v) for k, v in kept.items()}
        return kept, dropped

    def _cut(self, value: Any) -> Any:
        n = self.value_length
        if isinstance(value, str):
            return value[:n]
        if isinstance(value, tuple | list):
            return type(value)(v[:n] if isinstance(v, str) else v for v in value)
        return value


def span_limits(environ: Mapping[str, str] | None = None) -> SpanLimits:
    """The limits the environment (``os.environ`` unless given) sets; see the
    module's docstring."""
    environ = os.environ if environ is None else environ

    def whole(*names: str, default: int | None) -> int | None:
        for name in names:
            raw = (environ.get(name) or "").strip()
            if raw:
                if not raw.isdigit():
                    raise ValueError(f"{name}={raw!r}: expected a whole number of at least 0")
                return int(raw)
        return default

    count = whole("OTEL_ATTRIBUTE_COUNT_LIMIT", default=_DEFAULT_COUNT)
    return SpanLimits(
        attributes=whole("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", default=count) or 0,
        events=whole("OTEL_SPAN_EVENT_COUNT_LIMIT", default=_DEFAULT_COUNT) or 0,
        links=whole("OTEL_SPAN_LINK_COUNT_LIMIT", default=_DEFAULT_COUNT) or 0,
        event_attributes=whole("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", default=count) or 0,
        link_attributes=whole("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", default=count) or 0,
        value_length=whole(
            "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
            "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
            default=None,
        ),
    )
