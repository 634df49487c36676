"""Which prior turns a provider call sends, and how old turns leave the window.

Kimi and GLM bill a prompt prefix they have already seen at a lower, cached
price. A conversation's prefix (system prompt, note, prior turns) only stays
the same from one call to the next while no turn leaves the front of it: each
time the oldest turn is dropped, every byte after the system prompt moves and
the whole history is billed in full again. Dropping one turn at a time, as soon
as the window is full, does that on every call.

So turns leave in blocks. While the history sent last time, from its first turn
onwards, still fits, it is sent again from the same turn. When it no longer
fits, the oldest turns are dropped down to a *low-water mark*: the newest turns
costing at most ``low_water`` of the room, so the next several turns append
behind an unchanged prefix before anything is dropped again. ``low_water = 1``
is the one-turn-at-a-time rule.

While turns must be dropped at all, the start never moves back towards older
ones: a call that leaves more room (a shorter input, fewer files) than the one
before does not re-send dropped turns, which would move the prefix twice. Only
when the whole thread fits again is it all sent again.

Everything here is pure: the turn the window started at last time is read from
and saved to the thread's state by :func:`exai.store.history.assemble_messages`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

__all__ = ["DEFAULT_LOW_WATER", "HistoryWindow", "choose_window", "newest_within"]

# Half the room: after a drop the history fills half of what it may use, and the
# other half takes many turns to fill. A lower mark drops more context for the
# model; a higher one drops again sooner (1.0 drops on every call once full).
DEFAULT_LOW_WATER = 0.5


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """The loaded messages from ``start`` on are sent; they begin at ``first_turn``
    (None when no message is sent) and cost ``cost`` estimated tokens."""

    start: int
    first_turn: int | None
    cost: int


def _aligned(messages: Sequence[Mapping[str, Any]], turns: Sequence[int], start: int) -> int:
    """The first index at or after ``start`` where a whole group begins.

    A turn is kept or dropped whole, and a tool result stays with the message
    before it, so a tool-call round split across turns stays together too; tool
    results whose call is not sent are never sent alone.
    """
    count = len(messages)

    def inside_group(index: int) -> bool:
        return 0 < index < count and (
            turns[index] == turns[index - 1] or messages[index]["role"] == "tool"
        )

    while inside_group(start):
        start += 1
    if start < count and messages[start]["role"] == "tool":
        start += 1
        while inside_group(start):
            start += 1
    return start


def newest_within(
    messages: Sequence[Mapping[str, Any]], turns: Sequence[int], tokens: Sequence[int], budget: int
) -> int:
    """Where the newest whole groups costing at most ``budget`` begin (an index)."""
    return _newest(messages, turns, _suffix_costs(tokens), budget)


def _suffix_costs(tokens: Sequence[int]) -> list[int]:
    """Costs of the newest 1, 2, 3... messages."""
    return list(accumulate(reversed(tokens)))


def _newest(
    messages: Sequence[Mapping[str, Any]], turns: Sequence[int], suffix: list[int], budget: int
) -> int:
    return _aligned(messages, turns, len(messages) - bisect_right(suffix, budget))


def _window(turns: Sequence[int], tokens: Sequence[int], start: int) -> HistoryWindow:
    first = turns[start] if start < len(turns) else None
    return HistoryWindow(start, first, sum(tokens[start:]))


def choose_window(
    messages: Sequence[Mapping[str, Any]],
    turns: Sequence[int],
    tokens: Sequence[int],
    budget: int,
    *,
    complete: bool,
    previous_turn: int | None = None,
    low_water: float = DEFAULT_LOW_WATER,
) -> HistoryWindow:
    """The prior messages to send, given the room left for them.

    ``messages``, ``turns`` and ``tokens`` are the newest loaded messages of the
    thread, their turn numbers and estimated costs; ``complete`` says they are
    the whole thread. ``previous_turn`` is the turn the window began at the last
    time turns were dropped, if ever. See the module docstring for the rule.
    """
    if not 0 < low_water <= 1:
        raise ValueError("low_water is a fraction of the room: above 0, at most 1")
    suffix = _suffix_costs(tokens)
    fits_from = _newest(messages, turns, suffix, budget)
    if complete and fits_from == 0:
        return _window(turns, tokens, 0)
    if previous_turn is not None and turns and turns[0] <= previous_turn <= turns[-1]:
        # The previous start is loaded (an older one cannot fit: the store loads
        # every turn that might) and still fits: send the same prefix again.
        start = _aligned(messages, turns, bisect_left(turns, previous_turn))
        if start >= fits_from:
            return _window(turns, tokens, start)
    return _window(turns, tokens, _newest(messages, turns, suffix, int(budget * low_water)))
