"""Giving memory back to the system after a burst of connections.

Two things kept it, measured with bursts of clients that connect, send, and go:

* **Reference cycles.** A websockets connection is a web of cycles (its
  protocol's parser is a generator that refers to the protocol; futures, tasks
  and callbacks refer back to the connection), so an ended connection is freed
  only by a full garbage collection, about 40 KB of objects each. With the
  start-up heap frozen (``exai serve``), the daemon's own allocations seldom
  trigger one: over six rounds of 256 connections cut off at the hello
  timeout, RSS crept from 95 to 112 MB; with what follows it stayed at 100-101
  MB from the first round on.
* **malloc's free lists.** glibc keeps what Python frees for reuse: after ten
  logged-in clients each sent 30 MiB of a message in pieces and vanished, RSS
  stayed 70-120 MB above its start though every buffer had been freed;
  ``malloc_trim(0)`` brought it back to within 5 MB. (A fixed
  ``M_MMAP_THRESHOLD`` helped only for large buffers, not for 16 KiB pieces.)

:meth:`HeapKeeper.tick` runs on the core's heartbeat (every
``EXAI_PROGRESS_INTERVAL_S``), right after the sessions are swept. It runs a
full collection once ``COLLECT_AFTER`` connections have ended since the last
one, or when any have and a minute has passed: a few milliseconds with the
start-up heap frozen, about 30 ms per 100,000 live objects otherwise, so at
most once per that many connections. Then it asks ``mallinfo2`` how much malloc
holds free (about a microsecond) and, when that has grown by 4 MiB since the
last look, calls ``malloc_trim(0)`` (a few milliseconds after releasing
hundreds of megabytes). Growth, not the amount: memory handed back still counts
as free in malloc's books. Where the C library has neither function (musl,
macOS, glibc before 2.33) only the collection happens.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from typing import Any

__all__ = ["COLLECT_AFTER", "HeapKeeper"]

COLLECT_AFTER = 256  # connections ended since the last full collection
_COLLECT_EVERY_S = 60.0  # when fewer have ended, but some
_TRIM_ABOVE_BYTES = 4 * 1024 * 1024

_MALLINFO2_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")  # fmt: skip


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS]


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError, TypeError):
        return None
    return libc


class HeapKeeper:
    def __init__(self, trim_above_bytes: int = _TRIM_ABOVE_BYTES) -> None:
        self.trim_above_bytes = trim_above_bytes
        self._libc = _libc()
        self._settled = self.free_bytes()  # free after the last trim, or less since
        self._ended_at_collection = 0
        self._collected_at = time.monotonic()
        self.collections = 0
        self.trims = 0

    @property
    def can_trim(self) -> bool:
        return self._libc is not None

    def free_bytes(self) -> int:
        """What malloc holds free, in every arena; 0 where that cannot be asked."""
        return int(self._libc.mallinfo2().fordblks) if self._libc is not None else 0

    def tick(self, connections_ended: int, now: float | None = None) -> None:
        """``connections_ended``: how many connections this process has seen end."""
        now = time.monotonic() if now is None else now
        ended = connections_ended - self._ended_at_collection
        if ended >= COLLECT_AFTER or (ended > 0 and now - self._collected_at >= _COLLECT_EVERY_S):
            gc.collect()
            self._ended_at_collection = connections_ended
            self._collected_at = now
            self.collections += 1
        self.trim()

    def trim(self) -> bool:
        """Return memory malloc has been given back since the last look; True if it did."""
        if self._libc is None:
            return False
        free = self.free_bytes()
        if free - self._settled < self.trim_above_bytes:
            self._settled = min(self._settled, free)
            return False
        self._libc.malloc_trim(0)
        self._settled = self.free_bytes()
        self.trims += 1
        return True
