"""Helpers shared by the audit tests."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

from exai.emulators.postgrest import PostgrestEmulator

__all__ = ["stored_ids", "wait_until", "writer_pids"]


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Poll ``predicate`` on the loop until it holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(0.01)


def stored_ids(emulator: PostgrestEmulator) -> list[str]:
    return [row["event_id"] for row in emulator.rows("audit_events")]


def writer_pids(data_dir: Path) -> list[int]:
    """Processes running the audit writer for the outbox in ``data_dir``.

    A writer's working directory is its outbox's directory, which tells it
    apart from the writers of other tests running at the same time.
    """
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if b"exai.audit.writer" in cmdline and Path(cwd) == data_dir:
            found.append(int(proc.name))
    return found
