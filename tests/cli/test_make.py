"""The Makefile as a newcomer meets it: ``make help`` lists every target, and the install
step of ``make run`` prints nothing unless it fails, so the daemon's first line is the
first line of ``make run``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _targets() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    return re.findall(r"^([a-z][a-z0-9_-]*):(?!=)", text, re.MULTILINE)


def test_make_help_lists_every_target_with_one_line():
    done = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    listed = {line.split()[0]: line.split(None, 1)[1:] for line in lines[1:] if line.strip()}
    assert set(listed) == set(_targets()) and len(lines) == len(_targets()) + 1
    for target in ("run", "test", "setup", "help", "lint"):
        assert listed[target], f"`make {target}` has no description"
    assert all(listed[target] for target in listed), done.stdout


def _planned(venv: Path) -> list[str]:
    """The commands ``make setup`` would run to set up ``venv``."""
    done = subprocess.run(["make", "-n", "-B", "setup", f"VENV={venv}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if "-m venv" in line or "pip install" in line]


def _copy(into: Path) -> Path:
    source = into / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    return source


def _sh(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_the_install_step_prints_nothing_but_errors(tmp_path):
    """What `make setup` runs, in a new venv, without the dependencies (this checkout's
    venv has them; the build's own warnings are what printed 135 lines)."""
    source = _copy(tmp_path)
    create, upgrade, install = _planned(tmp_path / "venv")
    for command in (create, upgrade, install + " --no-deps"):
        done = _sh(command, source)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout + done.stderr == "", f"{command}:\n{done.stdout}{done.stderr}"
    broken = source / "pyproject.toml"
    broken.write_text(broken.read_text().replace('name = "exai-mcp"', 'name = ["exai-mcp"]'))
    failed = _sh(install + " --no-deps", source)
    assert failed.returncode != 0 and "error" in (failed.stdout + failed.stderr).lower()
