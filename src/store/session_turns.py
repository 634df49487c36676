"""An answered model-face request as an agent session keeps it, and where it went.

Apart from :mod:`exai.store.sessions`, which keeps them, so that the store's
interface (:mod:`exai.store.base`) can name them without importing the store's
parts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Kept", "SessionKept", "SessionTurn"]

Kept = Literal["started", "continued", "branched", "retried"]


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """One answered model-face request, as an agent session keeps it.

    ``messages`` is the conversation the agent sent (with the messages of the
    stored responses it continued, and its instructions as a system message),
    ``answer`` the assistant message it got back (text, tool calls, reasoning).
    The turn is stored under the call's request key, so the call's cost and
    trace rows are the turn's.
    """

    owner: str
    messages: Sequence[Mapping[str, Any]]
    answer: Mapping[str, Any]
    request_id: str
    session_id: str
    face: str
    client: str | None = None
    ref: str | None = None
    model: str | None = None
    provider: str | None = None
    usage: Mapping[str, Any] | None = field(default=None)
    # The models its principal may use (None: every model): memory is learnt from the
    # turn only with an extraction model among them.
    allowed_models: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class SessionKept:
    """Where a turn went: its thread and what keeping it did."""

    thread_id: str
    kept: Kept
    first_seq: int = 0
    last_seq: int = 0
    follows: str | None = None
    # What a person wrote in the turn's new user messages, for memory extraction.
    asked: tuple[str, ...] = ()
