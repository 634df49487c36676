"""Prometheus metrics of one daemon, served at ``GET /metrics``.

Each daemon owns its own ``CollectorRegistry`` rather than the process-global one,
so several daemons in one process (the tests run many) never share counters.
Gauges that mirror live state (connections, sessions, in flight, audit backlog)
are read at scrape time from callbacks, so they can never drift from the truth.

Finished calls are counted in batches: :meth:`DaemonMetrics.call_finished`
appends to a list, and the list is folded into the counters and histograms
before every scrape, once a second, and whenever it grows long. Updating a
prometheus-client series takes a lock and costs about as much as everything
else the daemon does to answer a trivial call, so it is kept off the call path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["DaemonMetrics"]

_FOLD_AT = 10_000  # pending finished calls that trigger a fold between ticks

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                    30, 60, 120, 300)  # fmt: skip


class DaemonMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = Counter("exai_calls", "Tool calls finished", ["tool", "status"], registry=r)
        self.latency = Histogram("exai_call_latency_seconds", "Tool call latency", ["tool"],
                                 buckets=_LATENCY_BUCKETS, registry=r)  # fmt: skip
        self.queue_wait = Histogram("exai_queue_wait_seconds", "Time a call waited for capacity",
                                    buckets=_LATENCY_BUCKETS, registry=r)  # fmt: skip
        self.frames_rejected = Counter("exai_frames_rejected", "Frames answered with an error",
                                       ["reason"], registry=r)  # fmt: skip
        self.connections_total = Counter("exai_connections_opened", "Connections accepted",
                                         registry=r)  # fmt: skip
        self.auth_failures = Counter("exai_auth_failures", "Failed hellos", ["reason"], registry=r)
        self._finished: list[tuple[str, str, float]] = []
        self._series: dict[tuple[str, str], tuple[Any, Any]] = {}

    def call_finished(self, tool: str, status: str, seconds: float) -> None:
        """Count one finished call (folded into the series later; see the module notes)."""
        self._finished.append((tool, status, seconds))
        if len(self._finished) >= _FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """Apply the pending finished calls to the counters and histograms."""
        pending, self._finished = self._finished, []
        for tool, status, seconds in pending:
            series = self._series.get((tool, status))
            if series is None:
                series = self._series[(tool, status)] = (
                    self.calls.labels(tool, status),
                    self.latency.labels(tool),
                )
            series[0].inc()
            series[1].observe(seconds)

    def gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        Gauge(name, doc, registry=self.registry).set_function(read)

    def render(self) -> bytes:
        self.fold()
        return generate_latest(self.registry)
