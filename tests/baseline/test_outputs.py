"""Statistics and the files a run leaves behind: JSON, CSV, markdown and PNG charts."""

from __future__ import annotations

import csv
import json

import pytest

from exai.baseline.report import write_outputs
from exai.baseline.results import FORMAT, ResultError, load_result
from exai.baseline.stats import OVERALL, percentile, summarize, timeline
from tests.baseline.helpers import synthetic_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_percentile_interpolates_between_ranks():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 100) == 100.0 and percentile(values, 0) == 1.0
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summary_counts_errors_by_code_and_takes_latency_from_successes():
    run = synthetic_run({"echo": [10.0] * 9 + [100.0]},
                        errors={"echo": ["TIMEOUT", "TIMEOUT", "RATE_LIMITED"]})  # fmt: skip
    s = summarize(run.records)["echo"]
    assert (s.calls, s.ok, s.errors) == (13, 10, 3)
    assert s.success_rate == pytest.approx(10 / 13)
    assert s.errors_by_code == {"RATE_LIMITED": 1, "TIMEOUT": 2}
    assert s.p50_ms == 10.0 and s.max_ms == 100.0  # the 1 ms failures are not latencies
    assert s.throughput_per_s == pytest.approx(10 / s.window_s)


def test_timeline_buckets_every_call_once():
    run = synthetic_run({"a": [100.0] * 30, "b": [50.0] * 20}, errors={"b": ["TIMEOUT"] * 2})
    tl = timeline(run.records, buckets=10)
    assert sum(map(sum, tl.ok.values())) == 50 and sum(map(sum, tl.errors.values())) == 2
    assert tl.bucket_s in (0.2, 0.5) and len(tl.starts) == len(tl.ok["a"])


def test_outputs_are_written_and_json_reads_back(tmp_path):
    run = synthetic_run({"echo": [1.0, 2.0, 3.0], "slow": [100.0, 120.0]},
                        errors={"slow": ["TIMEOUT"]})  # fmt: skip
    written = write_outputs(run, tmp_path / "out")

    assert set(written) == {"json", "csv", "markdown", "latency_png", "timeline_png"}
    data = json.loads(written["json"].read_text())
    assert data["format"] == FORMAT and len(data["calls"]) == 6
    assert set(data["summary"]) == {"echo", "slow", OVERALL}
    again = load_result(written["json"])
    assert again.summary == run.summary and again.records == run.records

    with written["csv"].open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 and rows[-1]["error_code"] == "TIMEOUT"

    md = written["markdown"].read_text()
    assert "| workload | tool | calls | success | p50 | p95 | p99 | max | calls/s" in md
    assert "| slow | echo | 3 | 66.7% |" in md and "| TIMEOUT | 1 |" in md
    assert "![latency.png](latency.png)" in md and "![timeline.png](timeline.png)" in md
    for key in ("latency_png", "timeline_png"):
        assert written[key].read_bytes()[:8] == PNG_MAGIC


def test_charts_cope_with_a_run_where_nothing_succeeded(tmp_path):
    run = synthetic_run({"down": []}, errors={"down": ["PROVIDER_ERROR"] * 3})
    written = write_outputs(run, tmp_path)
    assert written["latency_png"].read_bytes()[:8] == PNG_MAGIC
    assert "| down | echo | 3 | 0.0% | - | - | - | - |" in written["markdown"].read_text()


def test_a_file_that_is_not_a_result_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"format": "something-else"}')
    with pytest.raises(ResultError, match="not an exai baseline result"):
        load_result(path)
