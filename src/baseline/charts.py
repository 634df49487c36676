"""PNG charts of a run, drawn with matplotlib's Agg renderer.

Figures are built through the object API (``matplotlib.figure.Figure``), never
``pyplot``: no global figure state, no GUI backend picked from the environment,
so charts draw the same on a headless CI runner as on a laptop. matplotlib is
the ``baseline`` extra; without it the other outputs are still written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exai.baseline.results import RunResult
from exai.baseline.stats import timeline

__all__ = ["ChartsUnavailable", "draw_charts"]

LATENCY_PNG = "latency.png"
TIMELINE_PNG = "timeline.png"


class ChartsUnavailable(Exception):
    """matplotlib is not installed."""


def _figure(**kwargs: Any) -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        raise ChartsUnavailable(
            "charts skipped: matplotlib is not installed (pip install 'exai-mcp[baseline]')"
        ) from None
    return Figure(**kwargs)


def draw_charts(result: RunResult, out_dir: Path) -> dict[str, Path]:
    """Draw the latency and timeline charts into ``out_dir``; return their paths."""
    return {
        "latency_png": _latency(result, out_dir / LATENCY_PNG),
        "timeline_png": _timeline(result, out_dir / TIMELINE_PNG),
    }


def _latency(result: RunResult, path: Path) -> Path:
    """Box plot per workload beside its empirical CDF: spread and tail at once."""
    groups: dict[str, list[float]] = {}
    for r in result.records:
        if r.ok:
            groups.setdefault(r.workload, []).append(r.latency_ms)
    fig = _figure(figsize=(12, 5), layout="constrained")
    box, cdf = fig.subplots(1, 2)
    labels = list(groups)
    if labels:
        box.boxplot([groups[k] for k in labels], showfliers=True, whis=(5, 95))
        box.set_xticks(range(1, len(labels) + 1), labels, rotation=30, ha="right")
        for label in labels:
            values = sorted(groups[label])
            n = len(values)
            cdf.step(values, [(i + 1) / n for i in range(n)], where="post", label=label)
        cdf.legend(fontsize="small")
        every = [v for values in groups.values() for v in values]
        if max(every) > 50 * max(min(every), 1e-3):  # spans decades: a linear axis hides the fast
            box.set_yscale("log")
            cdf.set_xscale("log")
    else:
        box.text(0.5, 0.5, "no successful calls", ha="center", transform=box.transAxes)
    box.set_title("Latency per workload (whiskers p5-p95)")
    box.set_ylabel("latency (ms)")
    cdf.set_title("Latency CDF")
    cdf.set_xlabel("latency (ms)")
    cdf.set_ylabel("fraction of calls")
    cdf.grid(alpha=0.3)
    fig.savefig(path, dpi=100)
    return path


def _timeline(result: RunResult, path: Path) -> Path:
    """Successful calls per second per workload over the run, and errors below."""
    tl = timeline(result.records)
    fig = _figure(figsize=(12, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    width = tl.bucket_s
    # One more edge than buckets, so the last bucket is drawn as wide as the others.
    edges = [*tl.starts, tl.starts[-1] + width]
    for label, counts in tl.ok.items():
        rates = tl.rate(counts)
        top.step(edges, [*rates, rates[-1]], where="post", label=label)
    bottom_acc = [0.0] * len(tl.starts)
    for label, counts in tl.errors.items():
        if any(counts):
            rates = tl.rate(counts)
            bottom.bar(tl.starts, rates, width=width, bottom=bottom_acc, align="edge",
                       label=label)  # fmt: skip
            bottom_acc = [a + b for a, b in zip(bottom_acc, rates, strict=True)]
    if tl.ok:
        top.legend(fontsize="small")
    if any(bottom_acc):
        bottom.legend(fontsize="small")
    else:
        bottom.text(0.5, 0.5, "no errors", ha="center", va="center", transform=bottom.transAxes)
    top.set_title(f"Throughput (successful calls/s, {width:g} s buckets)")
    top.set_ylabel("calls/s")
    top.grid(alpha=0.3)
    bottom.set_title("Errors")
    bottom.set_ylabel("errors/s")
    bottom.set_xlabel("time since start (s)")
    bottom.grid(alpha=0.3)
    fig.savefig(path, dpi=100)
    return path
