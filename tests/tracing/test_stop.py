"""A clean stop keeps to one deadline, the exporter's timeout, however many batches
are queued for a collector that hangs; what did not go out is reported."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from exai import tracing
from exai.tracing import setup
from tests.conftest import make_settings

BATCHES = 6


class SilentCollector:
    """A loopback HTTP server that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted: list[socket.socket] = []  # one per export request
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.server.close()
        for conn in self.accepted:
            conn.close()


@contextmanager
def silent_collector() -> Iterator[SilentCollector]:
    collector = SilentCollector()
    try:
        yield collector
    finally:
        collector.close()


def test_a_stop_with_a_hanging_collector_keeps_to_the_exporters_timeout(tmp_path, monkeypatch):
    # The SDK reads these itself: one span a batch, and no export on a timer.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    with silent_collector() as collector:
        settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                                 otel_traces_sampler="always_on")  # fmt: skip
        assert setup.configure(settings)
        for i in range(BATCHES):
            with tracing.span(f"step {i}"):
                pass
        report = setup.shutdown()
        posted = len(collector.accepted)
    assert tracing.state.tracer is None
    # The batches still queued at the deadline are dropped, not posted: a stop that
    # waited for each batch in turn would have posted every one of them.
    assert posted < BATCHES
    assert report is not None and report.timeout_s == 0.5  # the one deadline
    assert report.spans_exported == 0 and report.spans_unexported == BATCHES
