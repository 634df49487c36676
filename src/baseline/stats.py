"""Summaries of call records: percentiles, success rate, throughput, a timeline.

Pure functions over :class:`~exai.baseline.records.CallRecord` lists, so the
report, the charts, the comparison and the upload all read the same numbers.
Latency percentiles are taken over successful calls only: a fast rejection is
not a fast answer, and errors are reported beside them by code.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from exai.baseline.records import CallRecord

__all__ = ["OVERALL", "Timeline", "ToolSummary", "percentile", "summarize", "timeline"]

OVERALL = "(all)"


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between closest ranks."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    pos = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    frac = pos - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac


@dataclass(slots=True)
class ToolSummary:
    """The figures of one workload (or ``(all)``) that reports and comparisons use."""

    workload: str
    tool: str
    calls: int
    ok: int
    errors: int
    success_rate: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    mean_ms: float | None
    ack_p50_ms: float | None
    first_chunk_p50_ms: float | None
    server_p50_ms: float | None
    throughput_per_s: float
    window_s: float
    retries: int
    resends: int
    output_bytes: int
    errors_by_code: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolSummary:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _p50(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    return percentile(present, 50) if present else None


def _summary(workload: str, tool: str, records: Sequence[CallRecord]) -> ToolSummary:
    ok = [r for r in records if r.ok]
    latencies = sorted(r.latency_ms for r in ok)
    window = 0.0
    if records:
        window = max(r.end_s for r in records) - min(r.start_s for r in records)
    codes = Counter(r.error_code or "UNKNOWN" for r in records if not r.ok)

    def pct(q: float) -> float | None:
        return percentile(latencies, q) if latencies else None

    return ToolSummary(
        workload=workload,
        tool=tool,
        calls=len(records),
        ok=len(ok),
        errors=len(records) - len(ok),
        success_rate=len(ok) / len(records) if records else 0.0,
        p50_ms=pct(50),
        p95_ms=pct(95),
        p99_ms=pct(99),
        max_ms=latencies[-1] if latencies else None,
        mean_ms=sum(latencies) / len(latencies) if latencies else None,
        ack_p50_ms=_p50(r.ack_ms for r in ok),
        first_chunk_p50_ms=_p50(r.first_chunk_ms for r in ok),
        server_p50_ms=_p50(r.server_ms for r in ok),
        throughput_per_s=len(ok) / window if window > 0 else 0.0,
        window_s=window,
        retries=sum(r.retries for r in records),
        resends=sum(r.resends for r in records),
        output_bytes=sum(r.output_bytes for r in records),
        errors_by_code=dict(sorted(codes.items())),
    )


def summarize(records: Sequence[CallRecord]) -> dict[str, ToolSummary]:
    """One summary per workload label in order of first appearance, then ``(all)``."""
    groups: dict[str, list[CallRecord]] = {}
    for r in records:
        groups.setdefault(r.workload, []).append(r)
    out = {label: _summary(label, rs[0].tool, rs) for label, rs in groups.items()}
    out[OVERALL] = _summary(OVERALL, OVERALL, records)
    return out


@dataclass(slots=True)
class Timeline:
    """Completed and failed calls per time bucket, per workload, by end time."""

    bucket_s: float
    starts: list[float]
    ok: dict[str, list[int]]
    errors: dict[str, list[int]]

    def rate(self, counts: list[int]) -> list[float]:
        return [c / self.bucket_s for c in counts]


def timeline(records: Sequence[CallRecord], buckets: int = 60) -> Timeline:
    """Bucket the run into about ``buckets`` slices of a round width (at least 0.1 s)."""
    span = max((r.end_s for r in records), default=0.0)
    bucket_s = max(0.1, _round_width(span / max(1, buckets)))
    n = max(1, math.ceil(span / bucket_s))
    labels = list(dict.fromkeys(r.workload for r in records))
    ok = {label: [0] * n for label in labels}
    errors = {label: [0] * n for label in labels}
    for r in records:
        i = min(n - 1, int(r.end_s / bucket_s))
        (ok if r.ok else errors)[r.workload][i] += 1
    return Timeline(bucket_s, [i * bucket_s for i in range(n)], ok, errors)


def _round_width(width: float) -> float:
    # 0.1, 0.2, 0.5, 1, 2, 5, 10 ...: bucket widths a reader can take in at a glance.
    if width <= 0:
        return 0.1
    magnitude = 10 ** math.floor(math.log10(width))
    for step in (1, 2, 5, 10):
        if width <= step * magnitude:
            return step * magnitude
    return 10 * magnitude
