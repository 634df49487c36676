"""Running the real ``exai`` console script as a subprocess, isolated from the developer's
settings: no ``EXAI_*`` or provider variable of the environment, no user settings file
(``XDG_CONFIG_HOME`` points into the test's directory), a data directory of its own."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from exai.emulators.ports import free_port as free_port
from tests.reliability.harness import listening

__all__ = ["EXAI", "Ran", "clean_env", "finish", "free_port", "listening", "run_exai", "spawn_exai"]

# The console script pip installed beside this interpreter: what a user runs.
EXAI = str(Path(sys.executable).with_name("exai"))

_VENDOR_VARS = ("KIMI_", "MOONSHOT_", "GLM_", "ZAI_", "ZHIPUAI_", "SUPABASE_")

# A process that has not exited by then hangs: the tests that use this bound check
# that something ends, never how fast.
HANG_S = 90.0


@dataclass
class Ran:
    code: int
    out: str
    err: str


def clean_env(tmp: Path, **env: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("EXAI_") and not k.startswith(_VENDOR_VARS)}  # fmt: skip
    base.update(
        XDG_CONFIG_HOME=str(tmp / "config"),
        EXAI_DATA_DIR=str(tmp / "data"),
        EXAI_AUDIT_ENABLED="false",
        EXAI_LOG_LEVEL="warning",
    )
    base.update(env)
    return base


async def spawn_exai(*args: str, env: dict[str, str], cwd: Path | None = None,
                     stdin: bool = False) -> asyncio.subprocess.Process:  # fmt: skip
    return await asyncio.create_subprocess_exec(
        EXAI, *args, env=env, cwd=cwd,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finish(proc: asyncio.subprocess.Process, stdin: bytes | None = None) -> Ran:
    """Wait for ``proc`` to exit; one that does not within :data:`HANG_S` fails the test."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), HANG_S)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"exai did not exit; stderr: {err.decode()}") from None
    return Ran(proc.returncode or 0, out.decode(), err.decode())


async def run_exai(
    *args: str, env: dict[str, str], cwd: Path | None = None, stdin: bytes | None = None
) -> Ran:
    """Run ``exai ARGS`` to its end."""
    proc = await spawn_exai(*args, env=env, cwd=cwd, stdin=stdin is not None)
    return await finish(proc, stdin)
