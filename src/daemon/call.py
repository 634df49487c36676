"""One ``call_tool`` in flight, and its life as a state.

A call is admitted (its task exists), then queued for capacity, then running,
then finished (its one result sent). The life moves only forwards, through
the small transitions below; what else is known about a call is a fact beside
its state, not a second state: why it is being stopped (``cancel_reason``,
set by a client's cancel, its deadline or a shutdown, whatever state it is
in) and whether the client has been told its deadline (``acked``, a fact of
the conversation with the client: a call may be acknowledged while queued or
while running, or never, when it is answered in its first step).

A call answered from the replay cache never becomes a :class:`Call`: it is a
frame sent again, not a life.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any

from exai.daemon.replay import call_fingerprint

__all__ = ["Call", "CallState", "ModelEvent"]


class CallState(enum.Enum):
    ADMITTED = "admitted"  # its task exists; its first step has not run
    QUEUED = "queued"  # waiting for capacity (per session, then for the daemon)
    RUNNING = "running"  # the tool is running
    FINISHED = "finished"  # its result is being or has been sent


@dataclass(frozen=True, slots=True)
class ModelEvent:
    """A structured stream event of one call (a provider delta), sent to the session
    of an in-process caller that asked for events instead of text chunks."""

    request_id: str
    delta: Any


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
    state: CallState = CallState.ADMITTED
    ran: bool = False  # it reached RUNNING: its result is kept for a retry
    cancel_reason: str | None = None  # "cancel", "timeout" or "shutdown"
    acked: bool = False
    events: bool = False  # the caller takes structured model events (in-process faces)

    # --- transitions ----------------------------------------------------------

    def begin(self) -> None:
        """Its task takes its first step: from now on it waits for capacity."""
        self.state = CallState.QUEUED

    def run(self) -> None:
        """It holds capacity: the tool runs."""
        self.state = CallState.RUNNING
        self.ran = True

    def finish(self) -> None:
        self.state = CallState.FINISHED

    def stop(self, reason: str) -> bool:
        """Ask the call to stop; True if its task should be cancelled now.

        The first reason given is the one reported. A call whose task has not
        taken its first step is not cancelled (that would end the task before it
        could answer); it sees ``cancel_reason`` as it starts and answers then.
        """
        if self.state is CallState.FINISHED or self.task is None or self.task.done():
            return False
        if self.cancel_reason is None:
            self.cancel_reason = reason
        return self.state is not CallState.ADMITTED

    @property
    def finished(self) -> bool:
        return self.state is CallState.FINISHED

    def fingerprint(self) -> str:
        """Of its tool and arguments: tells a retry from another call under its id.

        Computed when first asked for; most calls never need it.
        """
        if self.fingerprint_known is None:
            self.fingerprint_known = call_fingerprint(self.asked, self.arguments)
        return self.fingerprint_known
