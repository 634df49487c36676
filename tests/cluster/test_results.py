"""The rule for which finished results other daemons get, without a database."""

from __future__ import annotations

import pytest

from exai.cluster.results import last_per_call, worth_sharing
from exai.errors import (
    CancelledError,
    ExaiError,
    OverCapacityError,
    RateLimitedError,
    TimeoutError_,
    ValidationError_,
)
from exai.protocol import ErrorCode, ErrorInfo


def test_a_success_is_shared() -> None:
    assert worth_sharing(None)


@pytest.mark.parametrize(
    "error",
    [ValidationError_("bad"), CancelledError("cancelled by the client"), ExaiError("bug")],
)
def test_an_error_a_retry_would_only_repeat_is_shared(error: ExaiError) -> None:
    assert not error.retryable
    assert worth_sharing(error)


@pytest.mark.parametrize(
    "error",
    [
        OverCapacityError("full"),
        RateLimitedError("slow down"),
        TimeoutError_("too slow"),
        CancelledError("shutting down", retryable=True),
    ],
)
def test_an_error_that_asks_for_a_retry_is_kept_local_so_the_retry_runs(
    error: ExaiError,
) -> None:
    assert not worth_sharing(error)


def test_the_wire_form_of_an_error_is_judged_alike() -> None:
    assert not worth_sharing(ErrorInfo(code=ErrorCode.CANCELLED, message="x", retryable=True))
    assert worth_sharing(ErrorInfo(code=ErrorCode.VALIDATION_ERROR, message="x"))


def test_the_last_result_noted_for_a_call_wins() -> None:
    rows = [("s", "1", b"a"), ("s", "2", b"b"), ("s", "1", b"c"), ("t", "1", b"d")]
    assert last_per_call(rows) == [("s", "1", b"c"), ("s", "2", b"b"), ("t", "1", b"d")]
