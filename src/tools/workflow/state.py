"""A workflow's progress, kept with its conversation rather than on any tool.

Tools are singletons shared by every session, so the steps taken so far, the
consolidated findings, files and issues live in the conversation store under
``workflow:<tool>`` in the workflow's thread. Whoever can continue the thread
can continue the workflow, from any session and after a daemon restart; nobody
else ever sees it.

:class:`WorkflowState` is plain data with the rules for advancing it (steps in
order, one at a time); :func:`load_workflow`, :func:`create_thread` and
:func:`save_workflow` are the only functions here that touch the store.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from exai.errors import ValidationError_
from exai.store import ConversationStore
from exai.tools.workflow.inputs import Issue, WorkflowInput

__all__ = [
    "Completion",
    "StepRecord",
    "WorkflowState",
    "create_thread",
    "load_workflow",
    "save_workflow",
    "state_key",
    "thread_lock",
]

STATE_VERSION = 1


class StepRecord(BaseModel):
    step_number: int
    step: str
    findings: str
    confidence: str
    hypothesis: str | None = None
    request_id: str
    extra: dict[str, Any] = Field(default_factory=dict)  # tool-specific, e.g. planner branches


class Completion(BaseModel):
    """How the final step ended: the expert's answer, or why none was asked for."""

    expert_analysis: str | None = None
    skipped_because: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)  # model, provider, usage...


class WorkflowState(BaseModel):
    version: int = STATE_VERSION
    tool: str
    status: Literal["in_progress", "complete"] = "in_progress"
    total_steps: int
    steps: list[StepRecord] = Field(default_factory=list)
    files_checked: list[str] = Field(default_factory=list)
    relevant_files: list[str] = Field(default_factory=list)
    relevant_context: list[str] = Field(default_factory=list)
    issues: list[Issue] = Field(default_factory=list)
    confidence: str = "exploring"
    hypothesis: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    completion: Completion | None = None

    @classmethod
    def begin(cls, tool: str, arguments: WorkflowInput) -> WorkflowState:
        return cls(tool=tool, total_steps=arguments.total_steps)

    @property
    def last_step(self) -> int:
        return self.steps[-1].step_number if self.steps else 0

    def is_replay(self, arguments: WorkflowInput, request_id: str) -> bool:
        """Whether this exact request already recorded its step (a client retry)."""
        return bool(self.steps) and (
            self.steps[-1].request_id == request_id
            and self.steps[-1].step_number == arguments.step_number
        )

    def check_order(self, arguments: WorkflowInput, thread_id: str) -> None:
        """Refuse a step that is not the next one of this workflow."""
        n = arguments.step_number
        if self.status == "complete":
            raise ValidationError_(
                f"the {self.tool} workflow on continuation_id {thread_id} is already complete "
                f"(its final step was {self.last_step}); send step_number 1 to start a new one",
                details={"field": "step_number", "expected": 1, "got": n},
            )
        expected = self.last_step + 1
        if n != expected:
            raise ValidationError_(
                f"step out of order: the {self.tool} workflow on continuation_id {thread_id} "
                f"expects step_number {expected} (last recorded: {self.last_step}), got {n}",
                details={"field": "step_number", "expected": expected, "got": n},
            )

    def record(
        self, arguments: WorkflowInput, request_id: str, extra: dict[str, Any] | None = None
    ) -> None:
        """Add the step and fold its files, context and issues into the totals."""
        self.steps.append(
            StepRecord(
                step_number=arguments.step_number,
                step=arguments.step,
                findings=arguments.findings,
                confidence=arguments.confidence,
                hypothesis=arguments.hypothesis,
                request_id=request_id,
                extra=extra or {},
            )
        )
        self.total_steps = arguments.total_steps
        self.files_checked = _union(self.files_checked, arguments.files_checked)
        self.relevant_files = _union(self.relevant_files, arguments.relevant_files)
        self.relevant_context = _union(self.relevant_context, arguments.relevant_context)
        seen = {issue.key() for issue in self.issues}
        for issue in arguments.issues_found:
            if issue.key() not in seen:
                seen.add(issue.key())
                self.issues.append(issue)
        self.confidence = arguments.confidence
        if arguments.hypothesis:
            self.hypothesis = arguments.hypothesis
        self.options = arguments.options()

    def complete(self, completion: Completion) -> None:
        self.status = "complete"
        self.completion = completion


def _union(current: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys([*current, *new]))


def state_key(tool: str) -> str:
    return f"workflow:{tool}"


async def load_workflow(
    store: ConversationStore, owner: str, tool: str, continuation_id: str | None
) -> WorkflowState | None:
    """The workflow stored on ``continuation_id``, or None (no thread yet, or no workflow).

    Another principal's thread, or an unknown one, is ``CONVERSATION_NOT_FOUND``.
    """
    if continuation_id is None:
        return None
    thread = await store.get_thread(continuation_id, owner)
    raw = await store.get_state(thread.id, state_key(tool))
    if raw is None:
        return None
    try:
        return WorkflowState.model_validate(raw)
    except PydanticValidationError:
        raise ValidationError_(
            f"the stored {tool} workflow on continuation_id {thread.id} cannot be read; "
            "send step_number 1 to start it again"
        ) from None


async def create_thread(store: ConversationStore, owner: str, tool: str, step: str) -> str:
    """A new conversation for a workflow started without a ``continuation_id``."""
    first_line = (step.strip().splitlines() or [""])[0][:70]
    return (await store.create_thread(owner, title=f"{tool}: {first_line}")).id


async def save_workflow(store: ConversationStore, thread_id: str, state: WorkflowState) -> None:
    await store.put_state(thread_id, state_key(state.tool), state.model_dump(mode="json"))


# Steps on one thread run one at a time, so two concurrent requests for the same
# step cannot both pass the order check: within this daemon by an asyncio lock
# (entries vanish with the last holder), and across the daemons sharing a
# Postgres store by an advisory lock on the thread, taken once the local one is
# held so that waiters here do not each hold a database connection.
_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


@asynccontextmanager
async def thread_lock(thread_id: str | None, store: Any = None) -> AsyncIterator[None]:
    """Serialize steps on ``thread_id``; a new thread (None) needs no lock."""
    if thread_id is None:
        yield
        return
    lock = _locks.get(thread_id)
    if lock is None:
        lock = _locks[thread_id] = asyncio.Lock()
    async with lock:
        advisory = getattr(store, "advisory_lock", None)
        if advisory is None:
            yield
        else:
            async with advisory(f"workflow:{thread_id}"):
                yield
