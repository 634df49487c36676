"""Memory freed after a burst goes back to the system."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from exai.ws.heap import COLLECT_AFTER, HeapKeeper

MIB = 1024 * 1024


# Run in a process of its own: the resident size of a test worker also moves with
# whatever its other threads (event loops, provider pools, exporters) allocate.
_BURST = """
import json, psutil
from exai.ws.heap import HeapKeeper
MIB = 1024 * 1024
keeper = HeapKeeper()
if not keeper.can_trim:
    print(json.dumps(None)); raise SystemExit
process = psutil.Process()
keeper.trim()
start = process.memory_info().rss
# 160 MiB in 16 KiB buffers with small survivors in between (too big for Python's
# own allocator, so they sit between the buffers in malloc's heap), as the fragments
# of big messages leave it: freed, but not at the top.
burst, survivors = [], []
for i in range(10_000):
    burst.append(bytearray(16 * 1024))
    if i % 10 == 0:
        survivors.append(bytearray(1024))
del burst
held = process.memory_info().rss
trimmed = keeper.trim()
after = process.memory_info().rss
again = keeper.trim()
print(json.dumps({"held_mib": (held - start) / MIB, "trimmed": trimmed,
                  "after_mib": (after - start) / MIB, "again": again}))
"""


def test_memory_malloc_holds_free_after_a_burst_is_returned():
    done = subprocess.run([sys.executable, "-c", _BURST], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    figures = json.loads(done.stdout)
    if figures is None:
        pytest.skip("the C library has no mallinfo2/malloc_trim")
    assert figures["held_mib"] > 32  # freed, but malloc held it
    assert figures["trimmed"] is True
    assert figures["after_mib"] < 16  # given back to the system
    assert figures["again"] is False  # nothing much left to give back


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
