"""Giving memory the daemon has freed back to the system.

glibc's malloc keeps what Python frees for reuse rather than returning it, and a
burst leaves it holding much: after ten authenticated clients each sent 30 MiB
of a message and vanished, the daemon's RSS stayed 70-120 MB above where it
started though every buffer had been freed, and only ``malloc_trim(0)`` brought
it back (to within 5 MB). Pinning a fixed ``M_MMAP_THRESHOLD`` helped only for
large buffers, not for the 16 KiB fragments of the same message.

:meth:`HeapTrimmer.tick` runs once a second on the daemon's heartbeat: it asks
``mallinfo2`` how much malloc holds free (about a microsecond, 30 µs after a
burst) and when that has grown by more than a threshold since the last look,
calls ``malloc_trim(0)`` (a few milliseconds after releasing hundreds of
megabytes). Growth, not the amount: memory handed back still counts as free
in malloc's books. Where the C library has neither function (musl, macOS,
glibc before 2.33) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

__all__ = ["HeapTrimmer"]

_TRIM_ABOVE_BYTES = 8 * 1024 * 1024


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


class HeapTrimmer:
    def __init__(self, threshold_bytes: int = _TRIM_ABOVE_BYTES) -> None:
        self.threshold_bytes = threshold_bytes
        self._libc = _libc()
        self._settled = self.free_bytes()  # free after the last trim, or less since
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._libc is not None

    def free_bytes(self) -> int:
        """What malloc holds free, in every arena; 0 where that cannot be asked."""
        return int(self._libc.mallinfo2().fordblks) if self._libc is not None else 0

    def tick(self) -> bool:
        """Return memory freed since the last look to the system; True if it did."""
        if self._libc is None:
            return False
        free = self.free_bytes()
        if free - self._settled < self.threshold_bytes:
            self._settled = min(self._settled, free)
            return False
        self._libc.malloc_trim(0)
        self._settled = self.free_bytes()
        self.trims += 1
        return True
