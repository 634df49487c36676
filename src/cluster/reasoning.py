"""The tool-round reasoning cache, written through to the store in the background.

:class:`~exai.providers.tool_reasoning.ToolReasoning` keeps the reasoning of the
tool rounds exai returns to stateless callers (``/v1/chat/completions``) in the
daemon's memory. :class:`SharedReasoning` makes the store hold it too: with
Postgres every daemon on the database finds a round another made (HAProxy may
send each request of an agent's loop to a different daemon); with SQLite one
daemon finds its rounds again after a restart.

Nothing here is on a call's path. A kept round is queued in memory and wakes one
background task, which writes whatever is queued in one transaction (rounds kept
while a write is under way go in the next); every ``prune_every_s`` it removes
expired rows and each principal's oldest beyond its budget. The only read is
:meth:`ToolReasoning.recall`, for rounds a request carries that memory does not
hold: one query.

What this cannot recover: a round kept on a daemon that was killed before its
write (a few milliseconds; the next request then runs without its reasoning, as
docs/openai.md describes), and rounds queued beyond the memory bound while the
database was unreachable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from exai.cluster.writer import stop_then_write
from exai.logs import get_logger
from exai.port import KeptReasoning
from exai.providers.tool_reasoning import ToolReasoning

__all__ = ["SharedReasoning"]

log = get_logger("exai.cluster")

# After a failed write, the next is tried this much later (the queue keeps growing
# up to the memory bound meanwhile).
_RETRY_S = 1.0


class SharedReasoning:
    """Writes ``cache``'s rounds to ``store`` and reads the ones memory lacks from it.

    ``store`` is a :class:`~exai.store.sql.SqlStore` (it has
    :class:`~exai.store.reasoning.ReasoningRows`).
    """

    def __init__(self, cache: ToolReasoning, store: Any, *, prune_every_s: float = 60.0) -> None:
        self.cache = cache
        self._store = store
        self.prune_every_s = prune_every_s
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._pruned_at = 0.0
        self.stats = {"written": 0, "writes": 0, "write_failures": 0, "pruned": 0}
        cache.share(self._load, self._wanted.set)

    async def _load(self, owner: str, keys: Sequence[bytes]) -> list[KeptReasoning]:
        rows: list[KeptReasoning] = await self._store.tool_reasoning(owner, keys)
        return rows

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="exai-tool-reasoning"
            )

    async def aclose(self) -> None:
        """Stop the writer after writing what is queued (a graceful shutdown loses nothing)."""
        task, self._task = self._task, None
        await stop_then_write(task, self.write, "write of kept tool-round reasoning")

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            timeout = max(0.0, self._pruned_at + self.prune_every_s - loop.time())
            try:
                async with asyncio.timeout(timeout):
                    await self._wanted.wait()
            except TimeoutError:
                pass
            self._wanted.clear()
            try:
                await self.write()
                if loop.time() - self._pruned_at >= self.prune_every_s:
                    self._pruned_at = loop.time()
                    await self.prune()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats["write_failures"] += 1
                log.warning("writing kept tool-round reasoning failed",
                            error=f"{type(exc).__name__}: {exc}")  # fmt: skip
                await asyncio.sleep(_RETRY_S)
                self._wanted.set()

    async def write(self) -> None:
        """Write the queued rounds in one transaction; on failure they stay queued."""
        pending = self.cache.take_pending()
        if not pending:
            return
        try:
            await self._store.put_tool_reasoning(pending)
        except BaseException:
            self.cache.requeue(pending)
            raise
        self.stats["writes"] += 1
        self.stats["written"] += len(pending)

    async def prune(self) -> int:
        """Remove expired rows and each principal's oldest beyond its budget."""
        gone: int = await self._store.prune_tool_reasoning(self.cache.principal_bytes)
        self.stats["pruned"] += gone
        return gone
