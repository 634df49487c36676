"""One ``call_tool`` in flight, and its life as a state.

A call is admitted (its task exists), then queued for capacity, then running,
then finished (its one result sent, and kept for a retry); a call that ends
before it ran (stopped or refused while it waited for capacity) is dropped
instead, and its result is not kept, so a retry may run it. The life moves only
forwards, through the small transitions below, each of which checks the state
it leaves and refuses any other move with :class:`IllegalTransition`: a bug
that would answer a call twice, or run one that already answered, fails loudly
where it happens.

The state is the only record of where a call is in its life. Two facts about
a call are not its life and sit beside it: why it is being stopped
(``stop_reason``: a client's cancel, its deadline or a shutdown, asked for in
whatever state the call is), and whether the client has been told its deadline
(``acked``, a fact of the conversation with the client: a call may be
acknowledged while queued or while running, or never, when it is answered in
its first step).

A call answered from the replay cache never becomes a :class:`Call`: it is a
frame sent again, not a life.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any

from exai.daemon.replay import call_fingerprint
from exai.protocol import StreamEvent

__all__ = ["Call", "CallState", "IllegalTransition", "ModelEvent", "StopReason"]


class CallState(enum.Enum):
    ADMITTED = "admitted"  # its task exists; its first step has not run
    QUEUED = "queued"  # waiting for capacity (per session, then for the daemon)
    RUNNING = "running"  # the tool is running
    FINISHED = "finished"  # it ran; its result is being or has been sent, and is kept
    DROPPED = "dropped"  # it ended before it ran; its result is sent, not kept


# The states as plain names: the transitions run on every call, and reading a member
# off the enum class, or hashing one, costs more than the rest of a transition.
_ADMITTED, _QUEUED, _RUNNING = CallState.ADMITTED, CallState.QUEUED, CallState.RUNNING
_FINISHED, _DROPPED = CallState.FINISHED, CallState.DROPPED


class StopReason(enum.Enum):
    CANCEL = "cancel"  # the client cancelled it
    TIMEOUT = "timeout"  # its deadline passed
    SHUTDOWN = "shutdown"  # the daemon is shutting down and its grace period ended


class IllegalTransition(RuntimeError):
    """A transition asked of a call in a state it cannot leave that way (a bug)."""

    def __init__(self, call: Call, move: str) -> None:
        super().__init__(f"call {call.request_id!r}: cannot {move} from {call.state.value}")


@dataclass(frozen=True, slots=True)
class ModelEvent:
    """A structured stream event of one call (what the tool made of a provider delta),
    sent to the session of an in-process caller that asked for events instead of text
    chunks."""

    request_id: str
    delta: StreamEvent


@dataclass(eq=False, slots=True)
class Call:
    request_id: str
    tool: str
    timeout_s: float
    deadline: float  # time.monotonic()
    started: float
    # What the call asked for: its tool's name and arguments, and the frame's text
    # when the frame was small (see exai.daemon.replay).
    asked: str = ""
    arguments: Any = None
    request: str | None = None
    fingerprint_known: str | None = None
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None  # the deadline, armed after the first step
    last_progress: float = 0.0
    state: CallState = _ADMITTED
    stop_reason: StopReason | None = None
    acked: bool = False

    # --- transitions ----------------------------------------------------------

    def begin(self) -> None:
        """Its task takes its first step: from now on it waits for capacity."""
        if self.state is not _ADMITTED:
            raise IllegalTransition(self, "begin")
        self.state = _QUEUED

    def run(self) -> None:
        """It holds capacity: the tool runs."""
        if self.state is not _QUEUED:
            raise IllegalTransition(self, "run")
        self.state = _RUNNING

    def finish(self) -> None:
        """Its one result is on its way: kept for a retry if it ran, else dropped."""
        state = self.state
        if state is _RUNNING:
            self.state = _FINISHED
        elif state is _QUEUED:
            self.state = _DROPPED
        else:
            raise IllegalTransition(self, "finish")

    def stop(self, reason: StopReason) -> bool:
        """Ask the call to stop; True if its task should be cancelled now.

        The first reason given is the one reported. A call whose task has not
        taken its first step is not cancelled (that would end the task before it
        could answer); it sees ``stop_reason`` as it starts and answers then.
        """
        state = self.state
        if state is _FINISHED or state is _DROPPED or self.task is None or self.task.done():
            return False
        if self.stop_reason is None:
            self.stop_reason = reason
        return state is not _ADMITTED

    # --- what the state tells -------------------------------------------------

    @property
    def finished(self) -> bool:
        """Its result is on its way (or sent): no other frame of it may follow."""
        state = self.state
        return state is _FINISHED or state is _DROPPED

    @property
    def ran(self) -> bool:
        """It reached the tool: its result is kept for a retry."""
        state = self.state
        return state is _RUNNING or state is _FINISHED

    def fingerprint(self) -> str:
        """Of its tool and arguments: tells a retry from another call under its id.

        Computed when first asked for; most calls never need it.
        """
        if self.fingerprint_known is None:
            self.fingerprint_known = call_fingerprint(self.asked, self.arguments)
        return self.fingerprint_known
