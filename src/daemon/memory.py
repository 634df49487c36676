"""Giving memory the daemon has let go of back to the operating system.

Python hands freed blocks back to the C allocator, which keeps them for reuse.
With glibc, memory freed in the middle of the heap stays in the process's RSS
until ``malloc_trim`` releases its free pages, so a burst of large results kept
for replay would leave RSS at its high-water mark long after the sessions that
held them ended. :class:`ShrinkWatcher` calls :func:`release_freed_memory` once
what the daemon holds has shrunk well below its high-water mark; while it holds
steady, freed memory is reused and nothing is trimmed. Where there is no glibc
(musl, macOS) releasing does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["RELEASE_AFTER_BYTES", "ShrinkWatcher", "release_freed_memory"]

# Shrinking by less than this is left to the allocator to reuse: trimming walks
# the whole heap, which is not worth doing for a few small results.
RELEASE_AFTER_BYTES = 8 * 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def release_freed_memory() -> bool:
    """Return the allocator's free pages to the system; True if anything was returned."""
    return bool(_TRIM(0)) if _TRIM is not None else False


class ShrinkWatcher:
    """Releases freed memory when something watched has shrunk from its high-water mark.

    Told how many bytes are held each time it is asked (once a second, after the
    sweep); ``release`` runs when the amount has fallen ``threshold`` below the
    highest seen since the last release, whether it fell at once or over many
    sweeps, as results expire.
    """

    def __init__(
        self,
        threshold: int = RELEASE_AFTER_BYTES,
        release: Callable[[], bool] = release_freed_memory,
    ) -> None:
        self.threshold = threshold
        self.release = release
        self.high = 0

    def observe(self, held: int) -> bool:
        """Note ``held``; return True when this call released memory."""
        if held >= self.high:
            self.high = held
            return False
        if self.high - held < self.threshold:
            return False
        self.high = held
        return self.release()
