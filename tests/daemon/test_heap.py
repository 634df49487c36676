"""Memory freed after a burst goes back to the system."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from exai.ws.heap import COLLECT_AFTER, HeapKeeper

MIB = 1024 * 1024


def test_memory_malloc_holds_free_after_a_burst_is_returned():
    keeper = HeapKeeper()
    if not keeper.can_trim:
        pytest.skip("the C library has no mallinfo2/malloc_trim")
    process = psutil.Process()
    keeper.trim()
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
    assert keeper.trim() is True
    assert process.memory_info().rss < start + 16 * MIB
    assert keeper.trim() is False  # nothing much left to give back
    del survivors


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 2:
            seen.append(info["collected"])

    gc.callbacks.append(note)
    yield seen
    gc.callbacks.remove(note)


def test_cycles_are_collected_after_many_connections_or_a_minute(full_collections):
    keeper = HeapKeeper()
    keeper.tick(connections_ended=0, now=0.0)
    keeper.tick(connections_ended=COLLECT_AFTER - 1, now=1.0)
    assert full_collections == []
    keeper.tick(connections_ended=COLLECT_AFTER, now=2.0)
    assert len(full_collections) == 1
    keeper.tick(connections_ended=COLLECT_AFTER + 1, now=3.0)  # one more, soon after
    assert len(full_collections) == 1
    keeper.tick(connections_ended=COLLECT_AFTER + 1, now=63.0)  # a minute later
    assert len(full_collections) == 2
    keeper.tick(connections_ended=COLLECT_AFTER + 1, now=200.0)  # none ended since
    assert len(full_collections) == 2
