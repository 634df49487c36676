"""npm packages for the tests, installed once into a cache directory outside the repository.

Real clients (Claude Code, Codex CLI, the MCP Inspector) come from the npm
registry at pinned versions. Each set of packages gets its own prefix under
``$XDG_CACHE_HOME/exai-tests`` (``~/.cache`` by default), installed under a
lock so that concurrent test runs never install over each other, and never
again once it is complete.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["cache_root", "npm_install"]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "exai-tests"


def npm_install(packages: list[str]) -> Path:
    """The npm prefix holding ``packages`` (``name@version``), installing them once."""
    prefix = cache_root() / re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(packages))
    prefix.mkdir(parents=True, exist_ok=True)
    done = prefix / ".installed"
    with open(prefix / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            npm = shutil.which("npm") or "npm"
            subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                 "--loglevel=error", *packages],
                check=True, capture_output=True, timeout=900,
            )  # fmt: skip
            done.write_text("\n".join(packages))
    return prefix
