"""Notice that the process that launched the shim is gone.

An IDE that crashes or is killed does not always close the shim's stdin (a
grandchild may hold the pipe open), and an orphaned shim would keep a daemon
session alive for nobody. When the parent dies the kernel re-parents the shim,
so a change of ``os.getppid()`` is the signal; polling it is cheap and portable.
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["wait_for_parent_exit"]


async def wait_for_parent_exit(poll_s: float = 1.0) -> int:
    """Return the new parent pid once the original parent has exited."""
    original = os.getppid()
    while True:
        await asyncio.sleep(poll_s)
        current = os.getppid()
        if current != original:
            return current
