"""Which prior turns a call sends: old turns leave in blocks, not one by one."""

from __future__ import annotations

from typing import Any

import pytest

from exai.store.window import choose_window, newest_within


def chat_thread(turns: int, cost: int = 10) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    """A question and an answer per turn, each message costing ``cost`` tokens."""
    messages: list[dict[str, Any]] = []
    numbers: list[int] = []
    for n in range(1, turns + 1):
        messages += [{"role": "user", "content": f"q{n}"},
                     {"role": "assistant", "content": f"a{n}"}]  # fmt: skip
        numbers += [n, n]
    return messages, numbers, [cost] * len(messages)


def replay(turns: int, budget: int, low_water: float) -> list[int | None]:
    """The first turn sent on each call of a growing thread, the state carried
    from call to call as ``assemble_messages`` carries it."""
    firsts: list[int | None] = []
    previous = None
    for t in range(1, turns + 1):
        messages, numbers, tokens = chat_thread(t)
        window = choose_window(messages, numbers, tokens, budget, complete=True,
                               previous_turn=previous, low_water=low_water)  # fmt: skip
        assert window.cost <= budget
        assert window.cost == sum(tokens[window.start :])
        if window.start:
            previous = window.first_turn
        firsts.append(window.first_turn)
    return firsts


def test_a_thread_that_fits_is_sent_whole() -> None:
    messages, turns, tokens = chat_thread(5)
    window = choose_window(messages, turns, tokens, 100, complete=True, previous_turn=None)
    assert (window.start, window.first_turn, window.cost) == (0, 1, 100)


def test_turns_leave_in_blocks_down_to_the_low_water_mark() -> None:
    # 20 tokens a turn, 200 of room: 10 turns fit; a drop keeps 5 (half the room).
    firsts = replay(60, budget=200, low_water=0.5)
    assert firsts[:10] == [1] * 10
    assert firsts[10] == 7  # turn 11 of 11: turns 7..11 cost 100, the low-water mark
    changes = [t for t in range(1, 60) if firsts[t] != firsts[t - 1]]
    # Every drop keeps 5 turns and the next 5 append to an unchanged prefix.
    assert changes == [10, 16, 22, 28, 34, 40, 46, 52, 58]
    assert all(firsts[t] == firsts[t - 1] for t in range(11, 60) if t not in changes)


def test_one_at_a_time_is_the_low_water_mark_of_the_whole_room() -> None:
    firsts = replay(60, budget=200, low_water=1.0)
    # Once full, every call drops the oldest turn: the prefix changes on every call.
    assert firsts[10:] == list(range(2, 52))
    messages, turns, tokens = chat_thread(30)
    window = choose_window(messages, turns, tokens, 200, complete=True, low_water=1.0)
    assert window.start == newest_within(messages, turns, tokens, 200) == 40


def test_the_previous_start_is_kept_while_it_fits_and_never_moves_back() -> None:
    messages, turns, tokens = chat_thread(20)
    # Turns 12..20 cost 180: they fit in 200, so the window still starts at 12.
    window = choose_window(messages, turns, tokens, 200, complete=True, previous_turn=12)
    assert window.first_turn == 12
    # More room than last time: the dropped turns 1..11 are not sent again.
    window = choose_window(messages, turns, tokens, 350, complete=True, previous_turn=12)
    assert window.first_turn == 12
    # Less room: turns 12..20 no longer fit; drop to half of 150 (three turns).
    window = choose_window(messages, turns, tokens, 150, complete=True, previous_turn=12)
    assert window.first_turn == 18
    # A start the store did not load (older than every loaded turn) cannot fit.
    window = choose_window(messages[20:], turns[20:], tokens[20:], 200, complete=False,
                           previous_turn=3)  # fmt: skip
    assert window.first_turn == 16
    # The whole thread fits again: it is all sent.
    window = choose_window(messages, turns, tokens, 400, complete=True, previous_turn=12)
    assert window.first_turn == 1


def test_a_tool_round_is_never_split_by_the_start() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "$web_search", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
    ]
    turns = [1, 1, 2, 2, 3, 3]  # the tool result was stored with the next turn
    tokens = [10] * 6
    for previous in (None, 1, 2):
        window = choose_window(messages, turns, tokens, 45, complete=True,
                               previous_turn=previous, low_water=1.0)  # fmt: skip
        assert messages[window.start]["role"] == "user"
        assert window.start == 4


def test_low_water_must_be_a_fraction() -> None:
    messages, turns, tokens = chat_thread(3)
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ValueError, match="low_water"):
            choose_window(messages, turns, tokens, 10, complete=True, low_water=bad)
