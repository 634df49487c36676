"""Which finished calls' results other daemons get for a retry: the rule, without I/O.

A daemon sharing its results through Postgres (:mod:`exai.cluster.shared`) notes
each finished call's ``call_tool_res`` as it sends it. :func:`worth_sharing`
decides from the call's outcome, known as a value where the result is made,
whether a retry on another daemon should be answered with it;
:func:`last_per_call` keeps one result per call from a batch about to be written.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

__all__ = ["Outcome", "last_per_call", "worth_sharing"]

R = TypeVar("R", bound=tuple[Any, ...])


class Outcome(Protocol):
    """What a call ended with when it failed: an ``ExaiError`` or an ``ErrorInfo``."""

    @property
    def retryable(self) -> bool: ...


def worth_sharing(error: Outcome | None) -> bool:
    """Whether a call that ended with ``error`` (None: it succeeded) is answered on
    another daemon from its stored result.

    A result is shared unless it is an error that asks to be retried (the daemon
    shutting down, over capacity): such a retry is meant to run again, on whichever
    daemon it lands, not to get the same error back.
    """
    return error is None or not error.retryable


def last_per_call(rows: list[R]) -> list[R]:
    """One row per call, the last noted: rows are ``(session_id, request_id, ...)``."""
    by_key: dict[tuple[Any, Any], R] = {}
    for row in rows:
        by_key[(row[0], row[1])] = row
    return list(by_key.values())
