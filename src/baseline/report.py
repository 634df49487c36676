"""Writing a run to its results directory: raw JSON, CSV, markdown and charts.

The JSON is the source of truth (``compare`` and ``upload`` read it); the CSV
is one row per call for spreadsheets and pandas; the markdown summary is what a
person reads first, and links the charts drawn next to it.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from exai.baseline.records import CSV_FIELDS
from exai.baseline.results import RunResult
from exai.baseline.stats import OVERALL, ToolSummary

__all__ = ["render_markdown", "write_csv", "write_outputs"]

RESULT_JSON = "baseline.json"
CALLS_CSV = "calls.csv"
SUMMARY_MD = "summary.md"


def write_outputs(result: RunResult, out_dir: Path, *, charts: bool = True) -> dict[str, Path]:
    """Write every output into ``out_dir`` (created if needed); return them by kind."""
    from exai.baseline.charts import ChartsUnavailable, draw_charts

    out_dir.mkdir(parents=True, exist_ok=True)
    written = {"json": out_dir / RESULT_JSON, "csv": out_dir / CALLS_CSV}
    result.save(written["json"])
    write_csv(result, written["csv"])
    drawn: dict[str, Path] = {}
    note = ""
    if charts:
        try:
            drawn = draw_charts(result, out_dir)
        except ChartsUnavailable as exc:
            note = str(exc)
    written.update(drawn)
    written["markdown"] = out_dir / SUMMARY_MD
    chart_names = [p.name for p in drawn.values()]
    written["markdown"].write_text(render_markdown(result, chart_names, note), encoding="utf-8")
    return written


def write_csv(result: RunResult, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for record in result.records:
            writer.writerow(record.to_dict())


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _codes(codes: dict[str, int]) -> str:
    return ", ".join(f"{code} {n}" for code, n in codes.items()) or "-"


def _row(s: ToolSummary) -> str:
    cells = [
        s.workload if s.workload != OVERALL else "**all**",
        s.tool if s.workload != OVERALL else "",
        str(s.calls),
        f"{s.success_rate * 100:.1f}%",
        _ms(s.p50_ms), _ms(s.p95_ms), _ms(s.p99_ms), _ms(s.max_ms),
        f"{s.throughput_per_s:.1f}",
        f"{s.retries}/{s.resends}",
        _codes(s.errors_by_code),
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def render_markdown(result: RunResult, charts: list[str], note: str = "") -> str:
    run = result.run
    server = run.get("server") or {}
    lines = [
        f"# Baseline: {run.get('name', 'baseline')}",
        "",
        f"- run `{run.get('id', '?')}`, started {run.get('started_at', '?')}, "
        f"{run.get('duration_s', 0):.1f} s",
        f"- daemon {run.get('url', '?')} ({server.get('name', '?')} {server.get('version', '?')}), "
        f"reconnects: {run.get('reconnects', 0)}",
    ]
    if run.get("workload_file"):
        lines.append(f"- workload file `{run['workload_file']}`")
    if run.get("aborted"):
        lines.append(f"- **run aborted**: {run['aborted']}")
    for skip in result.skipped:
        lines.append(f"- skipped `{skip['workload']}`: {skip['reason']}")
    lines += [
        "",
        "Latency in ms over successful calls; throughput in successful calls per second over the "
        "workload's own time window; retries are calls issued again after a retryable error, "
        "resends are frames sent again after a reconnect.",
        "",
        "| workload | tool | calls | success | p50 | p95 | p99 | max | calls/s "
        "| retries/resends | errors by code |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [_row(s) for s in result.summary.values()]
    overall: Counter[str] = Counter()
    for label, s in result.summary.items():
        if label != OVERALL:
            overall.update(s.errors_by_code)
    if overall:
        lines += ["", "## Errors by code", "", "| code | calls |", "|---|---:|"]
        lines += [f"| {code} | {n} |" for code, n in overall.most_common()]
    if charts or note:
        lines += ["", "## Charts", ""]
        lines += [f"![{name}]({name})" for name in charts]
        if note:
            lines.append(f"_{note}_")
    return "\n".join(lines) + "\n"
