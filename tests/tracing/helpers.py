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

__all__ = ["SECRET", "Collector", "install_tracing"]

SECRET = "sk-trace-test-secret-0123456789"


def install_tracing(content: bool) -> tuple[Any, InMemorySpanExporter]:
    """Install tracing for a test; call ``tracing.reset()`` and the provider's
    ``shutdown()`` after it."""
    exporter = InMemorySpanExporter()
    provider = build_provider(exporter, scrub=Scrubber([SECRET]).scrub_text,
                              processor=SimpleSpanProcessor)  # fmt: skip
    tracing.install(provider, content=content)
    return provider, exporter


class Collector:
    """An OTLP/HTTP collector stand-in on loopback: keeps every span each export carried."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.spans: list[Any] = []
        self.posts = 0
        self.sizes: list[int] = []  # spans in each post
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest.FromString(body)
                collector.posts += 1
                size = 0
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans.extend(scope.spans)
                        size += len(scope.spans)
                collector.sizes.append(size)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def trace_ids(self) -> set[int]:
        return {int.from_bytes(s.trace_id, "big") for s in self.spans}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
