"""Freed memory goes back to the system once what the daemon holds has shrunk."""

from __future__ import annotations

from exai.daemon.memory import ShrinkWatcher


def test_memory_is_released_once_what_is_held_has_shrunk_from_its_peak() -> None:
    released: list[int] = []
    watcher = ShrinkWatcher(threshold=100, release=lambda: released.append(1) or True)
    for held in (0, 50, 400, 400, 350, 320):  # growing, steady, shrinking a little
        assert not watcher.observe(held)
    assert watcher.observe(290)  # 110 below the peak of 400, over several sweeps
    assert not watcher.observe(250)  # measured from where it was released
    assert watcher.observe(150)
    assert released == [1, 1]
