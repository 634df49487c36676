"""Tracing for a test: exai's tracing state with an in-memory exporter behind it.

The exporter is the OpenTelemetry SDK's own ``InMemorySpanExporter`` behind
exai's :class:`~exai.tracing.export.GuardedExporter` and the SDK's simple
processor (a stand-in for the batch processor a daemon runs, so a span is
there as soon as it ends). Nothing global of OpenTelemetry's is touched.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from exai import tracing
from exai.audit.scrub import Scrubber
from exai.tracing.setup import build_provider

__all__ = ["SECRET", "install_tracing"]

SECRET = "sk-trace-test-secret-0123456789"


def install_tracing(content: bool) -> tuple[Any, InMemorySpanExporter]:
    """Install tracing for a test; call ``tracing.reset()`` and the provider's
    ``shutdown()`` after it."""
    exporter = InMemorySpanExporter()
    provider = build_provider(exporter, scrub=Scrubber([SECRET]).scrub_text,
                              processor=SimpleSpanProcessor)  # fmt: skip
    tracing.install(provider, content=content)
    return provider, exporter
