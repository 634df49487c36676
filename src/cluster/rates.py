"""A principal's rate limit counted across daemons: one counter per fixed window.

Every daemon decides alone and at once, from what it knows: the calls the
shared counter held when it last synchronized (every daemon's, its own
included) plus the calls it admitted since. Every ``sync_s`` its
:class:`~exai.cluster.shared.ClusterState` adds those calls to the principal's
row for the window in Postgres and reads the new total back, in one statement
for all principals. No call waits on the database.

The price of deciding locally is a bounded overshoot: calls other daemons
admitted since the last synchronization are not yet seen. Within one window the
calls admitted are at most ``limit`` plus what the other daemons admit in one
synchronization interval (each also bounded by its own token bucket's burst).
Windows are fixed (aligned to the epoch, so every daemon agrees on them), so a
span straddling a boundary can see up to two windows' worth.

This module is pure: it is given the time and never touches the database.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from exai.errors import RateLimitedError

__all__ = ["WindowCounts", "WindowState"]


@dataclass(slots=True)
class WindowState:
    window: int  # window_start, seconds since the epoch
    known: int = 0  # the shared total as last read (every daemon's calls)
    unsent: int = 0  # admitted here, not yet added to the shared total
    sending: int = 0  # being added now


class WindowCounts:
    """Per-principal counts for the current window, and what to send next."""

    def __init__(self, rate_per_min: float, window_s: float) -> None:
        self.window_s = max(1, int(window_s))
        self.limit = max(1, math.floor(rate_per_min * self.window_s / 60.0))
        self._states: dict[str, WindowState] = {}

    def window_of(self, now: float) -> int:
        return int(now // self.window_s) * self.window_s

    def _state(self, principal: str, now: float) -> WindowState:
        window = self.window_of(now)
        state = self._states.get(principal)
        if state is None or state.window != window:
            state = self._states[principal] = WindowState(window)
        return state

    def check(self, principal: str, now: float) -> None:
        """Raise ``RATE_LIMITED`` if the window's calls, as far as known here, reach the limit."""
        state = self._state(principal, now)
        if state.known + state.unsent + state.sending >= self.limit:
            wait = state.window + self.window_s - now
            raise RateLimitedError(
                f"rate limit exceeded ({self.limit} calls per {self.window_s}s across daemons)",
                retry_after_s=round(max(wait, 0.001), 3),
            )

    def spend(self, principal: str, now: float) -> None:
        self._state(principal, now).unsent += 1

    def take(self, principal: str, now: float) -> None:
        self.check(principal, now)
        self.spend(principal, now)

    def to_send(self, now: float) -> list[tuple[str, int, int]]:
        """``(principal, window_start, calls)`` to add to the shared rows, 0 to only read.

        Principals of earlier windows are forgotten here; their unsent calls are
        still sent, so the counters stay true for whoever reads them.
        """
        window = self.window_of(now)
        out = []
        for principal, state in list(self._states.items()):
            if state.sending:
                continue  # a synchronization is still under way
            out.append((principal, state.window, state.unsent))
            state.sending, state.unsent = state.unsent, 0
            if state.window != window and not state.sending:
                del self._states[principal]
        return out

    def received(self, principal: str, window: int, total: int) -> None:
        """The shared total after our calls were added."""
        state = self._states.get(principal)
        if state is not None and state.window == window:
            state.known = total
            state.sending = 0

    def failed(self, sent: list[tuple[str, int, int]]) -> None:
        """A synchronization did not reach the database: send those calls again next time.

        Calls of a window that has already passed here are dropped: they no
        longer decide anything.
        """
        for principal, window, calls in sent:
            state = self._states.get(principal)
            if state is not None and state.window == window:
                state.unsent += calls
                state.sending = 0
