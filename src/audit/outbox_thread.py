"""One dedicated thread for every outbox operation.

SQLite calls block, so the event loop hands them to this thread and awaits
the result. A single thread serializes the writer's inserts and the shipper's
deletes on one connection (no lock contention inside the process) and keeps
them off the loop's default executor, which the rest of the daemon shares.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["OutboxThread"]

T = TypeVar("T")


class OutboxThread:
    def __init__(self, name: str = "exai-audit-outbox") -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self, *, wait: bool) -> None:
        """Stop taking work; an operation already running finishes on its own."""
        self._executor.shutdown(wait=wait, cancel_futures=not wait)
