"""Prometheus metrics of one daemon, served at ``GET /metrics``.

Each daemon owns its own ``CollectorRegistry`` rather than the process-global one,
so several daemons in one process (the tests run many) never share counters.
Gauges that mirror live state (connections, sessions, in flight, audit backlog)
are read at scrape time from callbacks, so they can never drift from the truth.

Finished calls are tallied in plain dictionaries and turned into the
``exai_calls`` counter and ``exai_call_latency_seconds`` histogram when scraped
(a custom collector, prometheus-client's documented way to expose numbers it
does not hold): a prometheus-client series takes a lock on every update, which
cost about as much as everything else the daemon does to answer a trivial call.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

__all__ = ["DaemonMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                    30, 60, 120, 300)  # fmt: skip


class DaemonMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = _CallTally(_LATENCY_BUCKETS)
        r.register(self.calls)
        self.queue_wait = Histogram("exai_queue_wait_seconds", "Time a call waited for capacity",
                                    buckets=_LATENCY_BUCKETS, registry=r)  # fmt: skip
        self.frames_rejected = Counter("exai_frames_rejected", "Frames answered with an error",
                                       ["reason"], registry=r)  # fmt: skip
        self.connections_total = Counter("exai_connections_opened", "Connections accepted",
                                         registry=r)  # fmt: skip
        self.auth_failures = Counter("exai_auth_failures", "Failed hellos", ["reason"], registry=r)
        self.connections_refused = Counter("exai_connections_refused",
                                           "WebSocket upgrades refused by a connection limit",
                                           ["limit"], registry=r)  # fmt: skip

    def call_finished(self, tool: str, status: str, seconds: float | None) -> None:
        """Count one finished call; ``seconds`` is None for one refused before it ran."""
        self.calls.add(tool, status, seconds)

    def gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        Gauge(name, doc, registry=self.registry).set_function(read)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _CallTally:
    """Finished calls by tool and status, and their latency by tool, as plain counts."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts: dict[tuple[str, str], int] = {}
        # tool -> per-bucket counts (not cumulative; the last is +Inf) and the sum
        self.latency: dict[str, tuple[list[int], list[float]]] = {}

    def add(self, tool: str, status: str, seconds: float | None) -> None:
        key = (tool, status)
        self.counts[key] = self.counts.get(key, 0) + 1
        if seconds is None:
            return
        series = self.latency.get(tool)
        if series is None:
            series = self.latency[tool] = ([0] * (len(self.bounds) + 1), [0.0])
        series[0][bisect_left(self.bounds, seconds)] += 1  # le: a bound counts values <= it
        series[1][0] += seconds

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily("exai_calls", "Tool calls finished", labels=["tool", "status"])
        for (tool, status), count in sorted(self.counts.items()):
            calls.add_metric([tool, status], count)
        yield calls
        latency = HistogramMetricFamily("exai_call_latency_seconds", "Tool call latency",
                                        labels=["tool"])  # fmt: skip
        edges = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        for tool, (counts, total) in sorted(self.latency.items()):
            cumulative = list(accumulate(counts))
            latency.add_metric([tool], list(zip(edges, cumulative, strict=True)), total[0])
        yield latency
