"""Notice that the process that launched the shim is gone.

An IDE that crashes or is killed does not always close the shim's stdin (a
grandchild may hold the pipe open), and an orphaned shim would keep a daemon
session alive for nobody. When the parent dies the kernel re-parents the shim,
so a change of ``os.getppid()`` is the signal; polling it is cheap and portable.
The original parent is the one the process started under
(:data:`exai.PARENT_AT_START`), not the one found once the shim is serving: a
parent that died during start-up counts.
"""

from __future__ import annotations

import asyncio
import os

from exai import PARENT_AT_START

__all__ = ["wait_for_parent_exit"]


async def wait_for_parent_exit(poll_s: float = 1.0, original: int = PARENT_AT_START) -> int:
    """Return the new parent pid once the original parent has exited."""
    while True:
        current = os.getppid()
        if current != original:
            return current
        await asyncio.sleep(poll_s)
