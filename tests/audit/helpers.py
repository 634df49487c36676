"""Helpers shared by the audit tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from exai.emulators.postgrest import PostgrestEmulator

__all__ = ["stored_ids", "wait_until"]


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Poll ``predicate`` on the loop until it holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(0.01)


def stored_ids(emulator: PostgrestEmulator) -> list[str]:
    return [row["event_id"] for row in emulator.rows("audit_events")]
