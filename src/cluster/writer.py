"""Stopping a background writer of shared state without losing what it holds.

The daemon's writers to the shared store (sessions and results, kept tool-round
reasoning) queue in memory and write from a task of their own. A graceful stop
cancels the task and writes what is still queued, once, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from exai.logs import get_logger

__all__ = ["stop_then_write"]

log = get_logger("exai.cluster")


async def stop_then_write(
    task: asyncio.Task[None] | None, write: Callable[[], Awaitable[object]], what: str
) -> None:
    """Cancel ``task`` (if any), wait for it, then ``write`` what is pending; a failure
    of that last write is logged as ``what`` failing, never raised."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    try:
        await write()
    except Exception:
        log.warning(f"last {what} failed", exc_info=True)
