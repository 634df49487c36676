"""Leases of a principal's rate limit across daemons, without a database or a clock.

Each test plays the database's part: the row's count of tokens asked for, in
the order requests reach it.
"""

from __future__ import annotations

import pytest

from exai.cluster.rates import WindowCounts
from exai.errors import RateLimitedError


class Row:
    """The (principal, window) row: every token asked for, in arrival order."""

    def __init__(self) -> None:
        self.asked = 0

    def sync(self, counts: WindowCounts, now: float) -> None:
        for principal, window, tokens in counts.to_send(now):
            self.asked += tokens
            counts.received(principal, window, self.asked)


def admitted(counts: WindowCounts, principal: str, tries: int, now: float) -> int:
    n = 0
    for _ in range(tries):
        try:
            counts.take(principal, now)
        except RateLimitedError:
            continue
        n += 1
    return n


def test_the_limit_is_the_per_minute_rate_scaled_to_the_window() -> None:
    assert WindowCounts(600, 10).limit == 100
    assert WindowCounts(1200, 60).limit == 1200


def test_calls_are_admitted_on_credit_while_a_lease_is_fetched_then_leases_follow_demand() -> None:
    counts, row = WindowCounts(600, 10), Row()  # 100 per window
    assert counts.credit == 2  # 2% of the limit
    assert admitted(counts, "alice", 5, 1000.0) == 2  # on credit; 5 were wanted
    row.sync(counts, 1000.0)
    assert row.asked == 2 * 5 + 2  # twice the demand, and the credit repaid
    assert admitted(counts, "alice", 20, 1000.1) == 10 + 2  # the lease, then credit again


def test_the_credit_is_not_given_once_the_window_is_spent() -> None:
    counts, row = WindowCounts(600, 10), Row()
    row.asked = 99  # the other daemons have asked for all but one token
    admitted(counts, "alice", 3, 1000.0)
    row.sync(counts, 1000.0)
    assert admitted(counts, "alice", 5, 1000.0) == 0


def test_daemons_leasing_from_one_row_exceed_the_limit_by_their_credit_at_most() -> None:
    daemons, row = [WindowCounts(60, 10) for _ in range(3)], Row()  # 10 per window
    total = 0
    for step in range(20):
        for counts in daemons:
            total += admitted(counts, "alice", 7, 1000.0 + step * 0.1)
            row.sync(counts, 1000.0 + step * 0.1)
    assert 10 <= total <= 10 + len(daemons) * daemons[0].credit
    with pytest.raises(RateLimitedError) as refused:
        daemons[0].take("alice", 1001.0)
    assert refused.value.retry_after_s == pytest.approx(9.0)  # the window is spent


def test_a_new_window_starts_afresh() -> None:
    counts, row = WindowCounts(60, 10), Row()
    admitted(counts, "alice", 30, 1000.0)
    row.sync(counts, 1000.0)
    admitted(counts, "alice", 30, 1000.0)
    assert admitted(counts, "alice", 1, 1010.0) == 1
    assert counts.to_send(1010.0) == [("alice", 1010, 3)]  # twice the demand, and the credit


def test_a_request_that_failed_is_asked_again() -> None:
    counts, row = WindowCounts(60, 10), Row()
    admitted(counts, "bob", 3, 1000.0)
    counts.failed(counts.to_send(1000.0))
    row.sync(counts, 1000.0)
    assert row.asked > 0 and admitted(counts, "bob", 1, 1000.0) == 1


def test_principals_are_counted_apart() -> None:
    counts = WindowCounts(60, 10)
    admitted(counts, "alice", 5, 1000.0)
    assert admitted(counts, "bob", 1, 1000.0) == 1
