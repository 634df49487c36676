"""The rate window decision across daemons, without a database or a clock."""

from __future__ import annotations

import pytest

from exai.cluster.rates import WindowCounts
from exai.errors import RateLimitedError


def test_the_limit_is_the_per_minute_rate_scaled_to_the_window() -> None:
    assert WindowCounts(600, 10).limit == 100
    assert WindowCounts(1200, 60).limit == 1200


def test_calls_other_daemons_made_count_once_the_shared_total_is_read() -> None:
    counts = WindowCounts(60, 10)  # 10 calls per 10 s window
    now = 1000.0
    for _ in range(3):
        counts.take("alice", now)
    sent = counts.to_send(now)
    assert sent == [("alice", 1000, 3)]
    counts.received("alice", 1000, 3 + 6)  # another daemon made 6
    counts.take("alice", now)
    with pytest.raises(RateLimitedError) as refused:
        counts.take("alice", now + 1)
    assert refused.value.retry_after_s == pytest.approx(9.0)


def test_a_new_window_starts_from_zero_and_forgets_the_old_one() -> None:
    counts = WindowCounts(60, 10)
    for _ in range(10):
        counts.take("alice", 1000.0)
    with pytest.raises(RateLimitedError):
        counts.check("alice", 1009.9)
    counts.take("alice", 1010.0)
    assert counts.to_send(1010.0) == [("alice", 1010, 1)]


def test_calls_not_written_are_sent_again_and_still_count() -> None:
    counts = WindowCounts(60, 10)
    counts.take("bob", 1000.0)
    sent = counts.to_send(1000.0)
    counts.failed(sent)
    assert counts.to_send(1000.0) == [("bob", 1000, 1)]
    for _ in range(9):
        counts.take("bob", 1000.0)
    with pytest.raises(RateLimitedError):
        counts.check("bob", 1000.0)


def test_principals_are_counted_apart() -> None:
    counts = WindowCounts(60, 10)
    for _ in range(10):
        counts.take("alice", 1000.0)
    counts.take("bob", 1000.0)
