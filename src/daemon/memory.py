"""Giving memory the daemon has let go of back to the operating system.

Python hands freed blocks back to the C allocator, which keeps them for reuse.
With glibc, memory freed in the middle of the heap stays in the process's RSS
until ``malloc_trim`` releases its free pages, so a burst of large results kept
for replay would leave RSS at its high-water mark long after the sessions that
held them ended. The daemon calls :func:`release_freed_memory` when it has just
dropped a lot at once. Where there is no glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["RELEASE_AFTER_BYTES", "release_freed_memory"]

# Dropping less than this is left to the allocator to reuse: trimming walks the
# whole heap, which is not worth doing for a few small results.
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
