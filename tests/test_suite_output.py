"""What ``make test`` prints: each failure named when it happens (``-q`` with xdist
prints only a letter), and pytest's closing summary line, which CI reads, kept."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import pytest

def test_fails_first():
    assert 1 == 2

@pytest.fixture
def broken():
    raise RuntimeError("setup breaks")

def test_setup_error(broken):
    pass

def test_passes_last():
    pass
"""


def test_a_failure_is_named_when_it_happens_and_the_summary_line_stays(tmp_path: Path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    # One worker keeps the file's order; this suite's conftest is the one under test.
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "conftest.py"), str(probe)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = ran.stdout.splitlines()

    def where(pattern: str) -> int:
        found = [i for i, line in enumerate(lines) if re.fullmatch(pattern, line)]
        assert found, f"no line {pattern!r} in:\n{ran.stdout}"
        return found[0]

    assert ran.returncode == 1, ran.stdout + ran.stderr
    # Each name comes on a line of its own, before the tests after it have run.
    failed = where(r"FAILED \S*::test_fails_first")
    error = where(r"ERROR \(in setup\) \S*::test_setup_error")
    assert failed < error < where(r"\..*\[100%\]"), ran.stdout
    assert lines[-1].startswith("1 failed, 1 passed, 1 error in "), ran.stdout
