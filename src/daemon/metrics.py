"""Prometheus metrics of one daemon, served at ``GET /metrics``.

Each daemon owns its own ``CollectorRegistry`` rather than the process-global one,
so several daemons in one process (the tests run many) never share counters.
Gauges that mirror live state (connections, sessions, in flight, audit backlog)
are read at scrape time from callbacks, so they can never drift from the truth.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["DaemonMetrics"]

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

    def gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        Gauge(name, doc, registry=self.registry).set_function(read)

    def render(self) -> bytes:
        return generate_latest(self.registry)
