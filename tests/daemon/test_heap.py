"""Memory freed after a burst goes back to the system."""

from __future__ import annotations

import psutil
import pytest

from exai.daemon.heap import HeapTrimmer

MIB = 1024 * 1024


def test_memory_malloc_holds_free_after_a_burst_is_returned():
    trimmer = HeapTrimmer()
    if not trimmer.available:
        pytest.skip("the C library has no mallinfo2/malloc_trim")
    process = psutil.Process()
    trimmer.tick()
    start = process.memory_info().rss
    # 160 MiB in 16 KiB buffers with small survivors in between (too big for
    # Python's own allocator, so they sit between the buffers in malloc's heap),
    # as the fragments of big messages leave it: freed, but not at the top.
    burst, survivors = [], []
    for i in range(10_000):
        burst.append(bytearray(16 * 1024))
        if i % 10 == 0:
            survivors.append(bytearray(1024))
    del burst
    held = process.memory_info().rss
    assert held > start + 32 * MIB
    assert trimmer.tick() is True
    assert process.memory_info().rss < start + 16 * MIB
    assert trimmer.tick() is False  # nothing much left to give back
    del survivors
