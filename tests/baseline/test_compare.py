"""Comparing two runs: deltas, regressions beyond thresholds, and the exit code."""

from __future__ import annotations

import json

import pytest

from exai.baseline.compare import Thresholds, compare, parse_threshold
from exai.baseline.main import main
from tests.baseline.helpers import synthetic_run


def _save(tmp_path, name, run):
    path = tmp_path / f"{name}.json"
    run.save(path)
    return str(path)


BASE = {"echo": [10.0] * 50, "tiny": [0.3] * 50}


def test_injected_latency_regression_is_flagged_and_fails_the_command(tmp_path, capsys):
    base = synthetic_run(BASE, run_id="base")
    slower = synthetic_run({"echo": [13.0] * 50, "tiny": [0.3] * 50}, run_id="new")

    comparison = compare(base, slower, Thresholds(relative_pct=10))
    flagged = {(r.workload, r.metric) for r in comparison.regressions}
    assert {("echo", "p50_ms"), ("echo", "p95_ms"), ("echo", "throughput_per_s")} <= flagged
    assert not any(w == "tiny" for w, _ in flagged)

    a, b = _save(tmp_path, "a", base), _save(tmp_path, "b", slower)
    assert main(["compare", a, b, "--threshold", "10%"]) == 1
    out = capsys.readouterr().out
    assert "| echo | p50_ms | 10.00 | 13.00 | +3.00 | +30.0% | **REGRESSION** |" in out
    # A looser threshold lets the same change pass.
    assert main(["compare", a, b, "--threshold", "50%"]) == 0


def test_same_run_has_no_regression(tmp_path, capsys):
    path = _save(tmp_path, "a", synthetic_run(BASE))
    assert main(["compare", path, path]) == 0
    assert "No regression" in capsys.readouterr().out


def test_tiny_absolute_changes_do_not_gate(tmp_path):
    base = synthetic_run({"tiny": [0.3] * 50})
    new = synthetic_run({"tiny": [0.6] * 50})  # +100%, but only 0.3 ms
    assert not [r for r in compare(base, new).regressions if r.metric.startswith("p")]


def test_success_rate_drop_is_a_regression(tmp_path, capsys):
    base = synthetic_run({"echo": [10.0] * 100})
    new = synthetic_run({"echo": [10.0] * 95}, errors={"echo": ["PROVIDER_ERROR"] * 5})
    assert [r.metric for r in compare(base, new).regressions] == ["success_rate"]
    a, b = _save(tmp_path, "a", base), _save(tmp_path, "b", new)
    assert main(["compare", a, b, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == 1


def test_workloads_in_only_one_run_are_listed_not_compared():
    comparison = compare(
        synthetic_run({"a": [1.0], "b": [1.0]}), synthetic_run({"b": [1.0], "c": [1.0]})
    )
    assert (comparison.only_in_base, comparison.only_in_new) == (["a"], ["c"])
    assert {r.workload for r in comparison.rows} == {"b"}


def test_threshold_spellings():
    assert parse_threshold("10%") == parse_threshold("10") == parse_threshold("0.1") == 10.0
    with pytest.raises(ValueError):
        parse_threshold("-5%")


def test_unreadable_file_is_a_usage_error(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "missing.json"), str(tmp_path / "x.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
