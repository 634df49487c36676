"""Fixtures of the tracing tests: an in-memory exporter installed for one test.

The exporter is the OpenTelemetry SDK's own ``InMemorySpanExporter`` behind
exai's :class:`~exai.tracing.export.GuardedExporter` and the SDK's simple
processor (a stand-in for the batch processor a daemon runs, so a span is
there as soon as it ends). It is installed in exai's tracing state for the
test and removed after it: nothing global of OpenTelemetry's is touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from exai import tracing
from tests.tracing.helpers import SECRET, install_tracing

__all__ = ["SECRET", "Spans"]


@pytest.fixture
def emulator(provider_emulator):
    provider_emulator.reset()
    return provider_emulator


class Spans:
    """The spans a test's calls produced, with small ways to find them."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    @property
    def all(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[Any]:
        return [s for s in self.all if s.name == name]

    def one(self, name: str) -> Any:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.all])
        return found[0]

    def starting(self, prefix: str) -> list[Any]:
        return [s for s in self.all if s.name.startswith(prefix)]

    def children(self, parent: Any) -> list[Any]:
        sid = parent.context.span_id
        return [s for s in self.all if s.parent is not None and s.parent.span_id == sid]

    def text(self) -> str:
        """Every string the spans carry (names, attributes, events, status)."""
        out: list[str] = []
        for s in self.all:
            out.append(s.name)
            out.extend(str(v) for v in (s.attributes or {}).values())
            for e in s.events:
                out.append(e.name)
                out.extend(str(v) for v in (e.attributes or {}).values())
            out.append(s.status.description or "")
        return "\n".join(out)


@pytest.fixture
def spans() -> Iterator[Spans]:
    provider, exporter = install_tracing(content=False)
    try:
        yield Spans(exporter)
    finally:
        tracing.reset()
        provider.shutdown()


@pytest.fixture
def spans_with_content() -> Iterator[Spans]:
    provider, exporter = install_tracing(content=True)
    try:
        yield Spans(exporter)
    finally:
        tracing.reset()
        provider.shutdown()
