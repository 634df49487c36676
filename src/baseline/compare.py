"""Two runs side by side: deltas per workload, and regressions that gate a release.

A latency percentile regresses when it grew by more than the threshold *and*
by more than ``min_delta_ms`` (so 0.3 ms becoming 0.4 ms on a no-op tool is
not a failed release); throughput regresses when it fell by more than the
threshold; the success rate when it fell by more than ``success_drop_pts``
percentage points. The maximum latency is one sample, too noisy to gate on,
so it is shown but never flagged. Workloads are matched by label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exai.baseline.results import RunResult
from exai.baseline.stats import OVERALL, ToolSummary

__all__ = ["Comparison", "MetricDelta", "Thresholds", "compare", "parse_threshold"]


@dataclass(frozen=True)
class Thresholds:
    relative_pct: float = 10.0
    min_delta_ms: float = 1.0
    success_drop_pts: float = 1.0


@dataclass(frozen=True)
class MetricDelta:
    workload: str
    metric: str
    base: float | None
    new: float | None
    regression: bool = False

    @property
    def delta(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        return self.new - self.base

    @property
    def delta_pct(self) -> float | None:
        if self.delta is None or not self.base:
            return None
        return self.delta / self.base * 100.0


@dataclass
class Comparison:
    base_id: str
    new_id: str
    thresholds: Thresholds
    rows: list[MetricDelta] = field(default_factory=list)
    only_in_base: list[str] = field(default_factory=list)
    only_in_new: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[MetricDelta]:
        return [r for r in self.rows if r.regression]

    def render_markdown(self) -> str:
        t = self.thresholds
        lines = [
            f"# Baseline comparison: `{self.base_id}` -> `{self.new_id}`",
            "",
            f"Thresholds: latency +{t.relative_pct:g}% and +{t.min_delta_ms:g} ms, throughput "
            f"-{t.relative_pct:g}%, success rate -{t.success_drop_pts:g} points.",
            "",
            "| workload | metric | base | new | delta | delta % | |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for r in self.rows:
            flag = "**REGRESSION**" if r.regression else ""
            lines.append(
                f"| {r.workload} | {r.metric} | {_num(r.base)} | {_num(r.new)} | "
                f"{_num(r.delta, signed=True)} | {_pct(r.delta_pct)} | {flag} |"
            )
        for label in self.only_in_base:
            lines.append(f"\n- `{label}` is only in the base run: not compared")
        for label in self.only_in_new:
            lines.append(f"\n- `{label}` is only in the new run: not compared")
        verdict = (
            f"{len(self.regressions)} regression(s) beyond the thresholds."
            if self.regressions
            else "No regression beyond the thresholds."
        )
        lines += ["", verdict]
        return "\n".join(lines) + "\n"


def parse_threshold(text: str) -> float:
    """``"10%"``, ``"10"`` and ``"0.1"`` are all ten percent."""
    raw = text.strip().removesuffix("%")
    value = float(raw)
    if not text.strip().endswith("%") and 0 < value < 1:
        value *= 100.0
    if value < 0:
        raise ValueError(f"threshold must not be negative: {text!r}")
    return value


def compare(base: RunResult, new: RunResult, thresholds: Thresholds | None = None) -> Comparison:
    t = thresholds or Thresholds()
    out = Comparison(base.run_id, new.run_id, t)
    base_labels = [k for k in base.summary if k != OVERALL]
    new_labels = [k for k in new.summary if k != OVERALL]
    out.only_in_base = [k for k in base_labels if k not in new.summary]
    out.only_in_new = [k for k in new_labels if k not in base.summary]
    for label in base_labels:
        if label in new.summary:
            out.rows += _compare_one(label, base.summary[label], new.summary[label], t)
    return out


def _compare_one(label: str, a: ToolSummary, b: ToolSummary, t: Thresholds) -> list[MetricDelta]:
    rows = []
    for metric in ("p50_ms", "p95_ms", "p99_ms"):
        old, cur = getattr(a, metric), getattr(b, metric)
        worse = (
            old is not None
            and cur is not None
            and cur - old > t.min_delta_ms
            and cur > old * (1 + t.relative_pct / 100.0)
        )
        rows.append(MetricDelta(label, metric, old, cur, worse))
    rows.append(MetricDelta(label, "max_ms", a.max_ms, b.max_ms))
    slower = a.throughput_per_s > 0 and b.throughput_per_s < a.throughput_per_s * (
        1 - t.relative_pct / 100.0
    )
    rows.append(MetricDelta(label, "throughput_per_s", a.throughput_per_s, b.throughput_per_s,
                            slower))  # fmt: skip
    dropped = (a.success_rate - b.success_rate) * 100.0 > t.success_drop_pts
    rows.append(MetricDelta(label, "success_rate", a.success_rate, b.success_rate, dropped))
    return rows


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"
