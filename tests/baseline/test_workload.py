"""Workload files: validation on load, and the default workload shipped twice."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from exai.baseline.workload import WorkloadError, load_workloads, parse_workloads

SCRIPT_DEFAULT = Path(__file__).parents[2] / "scripts/baseline_collection/workloads/default.toml"


def test_a_workload_file_parses_with_client_settings():
    ws = parse_workloads("""
        name = "mine"
        [client]
        call_timeout_s = 5
        connect_attempts = 5
        [[workload]]
        tool = "echo"
        name = "fast"
        arguments = { text = "x" }
        iterations = 3
        concurrency = 2
    """)
    assert ws.name == "mine" and ws.client.call_timeout_s == 5 and ws.client.connect_attempts == 5
    assert ws.client.max_frame_bytes == 20 * 1024 * 1024  # untouched defaults stay
    (w,) = ws.workload
    assert (w.label, w.tool, w.arguments, w.iterations, w.concurrency) == (
        "fast",
        "echo",
        {"text": "x"},
        3,
        2,
    )


@pytest.mark.parametrize(("text", "problem"), [
    ('[[workload]]\ntool = "echo"', "needs iterations or duration_s"),
    ('[[workload]]\ntool = "echo"\niterations = 1\n[[workload]]\ntool = "echo"\niterations = 1',
     "two workloads are labelled 'echo'"),
    ('[[workload]]\ntool = "echo"\niterations = 1\nconcurency = 2', "workload.0.concurency"),
    ('[[workload]]\ntool = "echo"\niterations = 0', "workload.0.iterations"),
    ('workload = [', "not valid TOML"),
    ('name = "empty"', "workload: Field required"),
])  # fmt: skip
def test_bad_workload_files_name_the_problem(text, problem):
    with pytest.raises(WorkloadError, match=r"my\.toml") as info:
        parse_workloads(text, "my.toml")
    assert problem in str(info.value)


def test_missing_file_is_a_workload_error(tmp_path):
    with pytest.raises(WorkloadError, match="cannot read workload file"):
        load_workloads(tmp_path / "nope.toml")


def test_default_workload_is_the_same_file_for_exai_and_the_script():
    packaged = resources.files("exai.baseline").joinpath("default_workload.toml").read_text()
    assert SCRIPT_DEFAULT.read_text() == packaged
    ws = load_workloads(SCRIPT_DEFAULT)
    tools = {w.tool: w for w in ws.workload}
    assert {"echo", "version", "status"} <= set(tools)
    assert tools["chat"].optional and not tools["echo"].optional
