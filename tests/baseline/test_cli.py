"""The collector's command line, run as operators run it, against a throwaway daemon."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from exai.baseline.results import load_result
from tests.baseline.helpers import synthetic_run

TINY = """
name = "tiny"
[[workload]]
tool = "echo"
arguments = { text = "hi", delay_s = 0.05 }
iterations = 6
concurrency = 3
[[workload]]
tool = "version"
iterations = 3
"""


async def _run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "EXAI_WS_PORT": "1"},  # a daemon from the environment is never used
    )  # fmt: skip
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_script_with_emulator_writes_every_output(tmp_path):
    (tmp_path / "w.toml").write_text(TINY)
    out = tmp_path / "results"
    code, stdout, stderr = await _run(
        "-m",
        "scripts.baseline_collection.main",
        "--with-emulator",
        "--workload",
        str(tmp_path / "w.toml"),
        "--out",
        str(out),
    )
    assert code == 0, stderr
    assert {p.name for p in out.iterdir()} == {"baseline.json", "calls.csv", "summary.md",
                                               "latency.png", "timeline.png"}  # fmt: skip
    result = load_result(out / "baseline.json")
    assert (result.summary["echo"].ok, result.summary["version"].ok) == (6, 3)
    assert result.run["workload_file"].endswith("w.toml")
    assert "| echo | echo | 6 | 100.0% |" in stdout


async def test_exai_baseline_refuses_an_unknown_tool_before_running(tmp_path):
    (tmp_path / "w.toml").write_text(TINY + '[[workload]]\ntool = "frobnicate"\niterations = 1\n')
    out = tmp_path / "results"
    code, _, stderr = await _run(
        "-m",
        "exai.cli.main",
        "baseline",
        "--with-emulator",
        "--workload",
        str(tmp_path / "w.toml"),
        "--out",
        str(out),
    )
    assert code == 2
    assert "no tool 'frobnicate'" in stderr and "nothing was run" in stderr
    assert not out.exists()


async def test_exai_baseline_compare_exit_code(tmp_path):
    synthetic_run({"echo": [10.0] * 20}).save(tmp_path / "a.json")
    synthetic_run({"echo": [20.0] * 20}).save(tmp_path / "b.json")
    code, stdout, _ = await _run(
        "-m",
        "exai.cli.main",
        "baseline",
        "compare",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "--json",
    )
    assert code == 1 and json.loads(stdout)["regressions"] >= 1
