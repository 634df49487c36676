"""Keeping the daemon's key ring current: poll the store's change marker, reload on a move.

Authentication reads :class:`~exai.keys.KeyRing` only, without I/O. This task
reads the store's ``key_changes`` version every :data:`POLL_S` (one primary-key
read) and, when it moved, reads every key and revoked JWT id and replaces the
ring whole: a key revoked on any daemon sharing the store is refused here within
a poll. Each :data:`FLUSH_S` it also writes when the keys presented since were
last used, in one batch. A store that does not answer leaves the ring as it was
(and says so in the log once per outage) until it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from exai.keys import KeyRing
from exai.logs import get_logger

__all__ = ["FLUSH_S", "POLL_S", "KeyWatcher"]

POLL_S = 0.25
FLUSH_S = 5.0

log = get_logger("exai.keys")


class KeyWatcher:
    def __init__(
        self, store: Any, ring: KeyRing, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.ring = ring
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def load(self) -> None:
        """Fill the ring from the store (before any face listens)."""
        version, keys, jtis = await self.store.keys_and_jtis()
        self.ring.replace(keys, (j.jti for j in jtis), version)

    async def refresh(self) -> bool:
        """Reload when the marker moved; True when it did."""
        version = await self.store.keys_version()
        if version == self.ring.version:
            return False
        await self.load()
        log.info("keys reloaded", version=self.ring.version)
        return True

    async def flush(self) -> None:
        used = self.ring.take_used()
        if used:
            await self.store.mark_keys_used(used)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="exai-keys")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self.flush()

    async def _run(self) -> None:
        next_flush = self._clock() + FLUSH_S
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self.refresh()
                if self._clock() >= next_flush:
                    next_flush = self._clock() + FLUSH_S
                    await self.flush()
                if self._failing:
                    log.info("keys readable again")
                self._failing = False
            except Exception as exc:
                if not self._failing:
                    log.warning("keys could not be read; the ring stays as it was",
                                error=f"{type(exc).__name__}: {exc}")  # fmt: skip
                self._failing = True
