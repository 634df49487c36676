"""A principal's rate limit across daemons: local leases of a per-window Postgres count.

Every daemon decides alone and at once, from tokens it has leased for the
current window; no call waits on the database. Every ``sync_s`` its
:class:`~exai.cluster.shared.ClusterState` asks, in one statement for all
principals, for more tokens where calls are being made: twice what was asked of
it since the last request, less what it still holds. The row for (principal,
window) counts every token asked for, by every daemon, in the order the row lock
gives them; a request is granted the part that still fits under the limit, so
the tokens granted across all daemons never exceed the limit.

Two things bend that, and they are the stated tolerance:

* a daemon whose lease is used up, while the window is not known to be spent,
  admits up to ``credit`` calls (2% of the window's limit, at least one) before
  more tokens arrive, so a principal is not refused for the 0.1 s a lease takes;
  those calls are asked for with the next request, and if the window turns out
  spent they are over the limit: at most ``credit`` per daemon per window;
* a lease a daemon does not use by the end of the window is lost, so a
  principal whose calls move between daemons may get somewhat less than the
  limit, never more.

Windows are fixed (aligned to the epoch, so every daemon agrees on them); a
span straddling a boundary can see up to two windows' worth.

This module is pure: it is given the time and never touches the database.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from exai.errors import RateLimitedError

__all__ = ["WindowCounts", "WindowState"]

_CREDIT_SHARE = 0.02  # of the window's limit, admitted on credit while a lease is fetched


@dataclass(slots=True)
class WindowState:
    window: int  # window_start, seconds since the epoch
    granted: int = 0  # tokens leased to this daemon for the window
    used: int = 0  # calls admitted
    wanted: int = 0  # calls asked for since the last request (admitted or not)
    asking: int = 0  # tokens being asked for now
    spent: bool = False  # the window's limit is reached across daemons


class WindowCounts:
    """Per-principal leases for the current window, and what to ask for next."""

    def __init__(self, rate_per_min: float, window_s: float) -> None:
        self.window_s = max(1, int(window_s))
        self.limit = max(1, math.floor(rate_per_min * self.window_s / 60.0))
        self.credit = max(1, math.ceil(self.limit * _CREDIT_SHARE))
        self._states: dict[str, WindowState] = {}
        self._limits: dict[str, tuple[int, int]] = {}  # a principal's own: limit, credit

    def set_rate(self, principal: str, rate_per_min: float | None) -> None:
        """Count ``principal`` against its own rate (None: the daemon's)."""
        if rate_per_min is None:
            self._limits.pop(principal, None)
            return
        limit = max(1, math.floor(rate_per_min * self.window_s / 60.0))
        self._limits[principal] = (limit, max(1, math.ceil(limit * _CREDIT_SHARE)))

    def _limit(self, principal: str) -> tuple[int, int]:
        return self._limits.get(principal) or (self.limit, self.credit)

    def window_of(self, now: float) -> int:
        return int(now // self.window_s) * self.window_s

    def _state(self, principal: str, now: float) -> WindowState:
        window = self.window_of(now)
        state = self._states.get(principal)
        if state is None or state.window != window:
            state = self._states[principal] = WindowState(window)
        return state

    def check(self, principal: str, now: float) -> None:
        """Raise ``RATE_LIMITED`` unless this daemon holds a token for the call."""
        state = self._state(principal, now)
        state.wanted += 1
        limit, credit = self._limit(principal)
        allowance = state.granted + (0 if state.spent else credit)
        if state.used < allowance:
            return
        window_end = state.window + self.window_s - now
        raise RateLimitedError(
            f"rate limit exceeded ({limit} calls per {self.window_s}s across daemons)",
            retry_after_s=round(
                max(window_end if state.spent else min(window_end, 0.25), 0.001), 3
            ),
        )

    def spend(self, principal: str, now: float) -> None:
        self._state(principal, now).used += 1

    def take(self, principal: str, now: float) -> None:
        self.check(principal, now)
        self.spend(principal, now)

    def to_send(self, now: float) -> list[tuple[str, int, int]]:
        """``(principal, window_start, tokens)`` to ask for; principals of past windows
        are forgotten."""
        window = self.window_of(now)
        out = []
        for principal, state in list(self._states.items()):
            if state.window != window:
                if not state.asking:
                    del self._states[principal]
                continue
            if state.asking or state.spent or not state.wanted:
                continue
            held = state.granted - state.used
            ask = max(0, 2 * state.wanted - held)  # a negative hold repays the credit
            state.wanted = 0
            if ask:
                state.asking = ask
                out.append((principal, state.window, ask))
        return out

    def received(self, principal: str, window: int, total: int) -> None:
        """The row's count of tokens asked for, ours included (the last ``asking``)."""
        state = self._states.get(principal)
        if state is None or state.window != window or not state.asking:
            return
        before = total - state.asking
        grant = max(0, min(state.asking, self._limit(principal)[0] - before))
        state.granted += grant
        state.spent = grant < state.asking
        state.asking = 0

    def failed(self, sent: list[tuple[str, int, int]]) -> None:
        """A request did not reach the database: ask again next time."""
        for principal, window, tokens in sent:
            state = self._states.get(principal)
            if state is not None and state.window == window:
                state.asking = 0
                state.wanted += tokens // 2 or 1
