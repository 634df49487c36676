"""The one engine behind every multi-step tool (codereview, debug, planner, ...).

A step is checked completely before anything is stored: its file paths against
the allowed roots, the tool's own evidence (precommit's repository), the thread
(``CONVERSATION_NOT_FOUND`` for someone else's) and the step order. Then:

* an intermediate step (``next_step_required``) is folded into the workflow's
  stored state and answered at once, with no model call, by the consolidated
  picture and what to investigate next;
* the final step asks the expert model once, through
  :func:`exai.tools.turn.run_turn`, with the consolidated findings, the issues
  and the relevant files, unless the agent is certain or asked for no model;
  the state is saved only after that succeeds, so a failed final step can be
  sent again.

A subclass supplies its input model, the expert's role and task, a checklist of
areas to investigate, and optionally evidence of its own; it keeps no state.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from exai.errors import ExaiError, InternalError, ValidationError_
from exai.files import acheck_paths, check_paths
from exai.tools.base import Tool, ToolContext, ToolResult
from exai.tools.turn import TurnRequest, run_turn
from exai.tools.workflow.inputs import WorkflowInput
from exai.tools.workflow.report import consolidated, expert_prompt, next_step
from exai.tools.workflow.state import (
    Completion,
    WorkflowState,
    create_thread,
    load_workflow,
    save_workflow,
    thread_lock,
)

__all__ = ["Evidence", "WorkflowTool"]


@dataclass(slots=True)
class Evidence:
    """What a tool gathered itself for this step (precommit: the git changes)."""

    response: dict[str, Any] = field(default_factory=dict)  # shown to the agent
    sections: list[str] = field(default_factory=list)  # added to the expert prompt
    metadata: dict[str, Any] = field(default_factory=dict)


class WorkflowTool(Tool):
    Input: ClassVar[type[WorkflowInput]]
    # The expert model's system prompt.
    expert_role: ClassVar[str]
    # Areas to investigate, in order, spread over the agent's steps.
    checklist: ClassVar[tuple[str, ...]] = ()
    # What the agent should do with a completed workflow.
    conclusion: ClassVar[str] = "Present the findings to the user, most important first."

    # --- what a tool may override (all pure, all stateless) ---------------------

    def areas(self, options: dict[str, Any]) -> tuple[str, ...]:
        return self.checklist

    def expert_task(self, state: WorkflowState) -> str:
        """What the expert must produce from the consolidated investigation."""
        raise NotImplementedError

    def check_step(self, arguments: WorkflowInput, state: WorkflowState) -> dict[str, Any]:
        """Refuse a step that makes no sense given the state; return extra data to record."""
        return {}

    def advice(self, state: WorkflowState) -> list[str]:
        """Tool-specific guidance for the next step, beyond the checklist."""
        return []

    def summary(self, state: WorkflowState) -> dict[str, Any]:
        return consolidated(state, self.min_severity(state))

    def min_severity(self, state: WorkflowState) -> str | None:
        return None

    async def evidence(self, arguments: WorkflowInput, context: ToolContext) -> Evidence:
        """Gather (and validate) what the tool reads itself; runs before any state changes."""
        return Evidence()

    # --- the engine ---------------------------------------------------------------

    async def run(self, arguments: WorkflowInput, context: ToolContext) -> ToolResult:
        store = context.services.store
        if store is None:
            raise InternalError("the daemon was started without a conversation store")
        owner = context.principal.name
        if arguments.paths():
            await acheck_paths(arguments.paths(), context.roots)
        evidence = await self.evidence(arguments, context)

        async with thread_lock(arguments.continuation_id, store):
            state = await load_workflow(store, owner, self.name, arguments.continuation_id)
            thread_id = arguments.continuation_id
            if state is not None and state.is_replay(arguments, context.request_id):
                assert thread_id is not None
                return self._result(thread_id, state, evidence, arguments)
            if arguments.step_number == 1:
                state = WorkflowState.begin(self.name, arguments)
            elif state is None:
                raise ValidationError_(
                    f"no {self.name} workflow on continuation_id {thread_id}; "
                    "start one with step_number 1",
                    details={"field": "step_number", "expected": 1, "got": arguments.step_number},
                )
            else:
                state.check_order(arguments, str(thread_id))
            extra = self.check_step(arguments, state)
            if thread_id is None:
                thread_id = await create_thread(store, owner, self.name, arguments.step)
            state.record(arguments, context.request_id, extra)
            if arguments.next_step_required:
                state.total_steps = max(state.total_steps, arguments.step_number + 1)
            else:
                state.complete(await self._conclude(arguments, context, thread_id, state, evidence))
            await save_workflow(store, thread_id, state)
        return self._result(thread_id, state, evidence, arguments)

    async def _conclude(
        self,
        arguments: WorkflowInput,
        context: ToolContext,
        thread_id: str,
        state: WorkflowState,
        evidence: Evidence,
    ) -> Completion:
        if not arguments.use_assistant_model:
            return Completion(skipped_because="use_assistant_model is false")
        if arguments.confidence == "certain":
            return Completion(
                skipped_because="confidence is certain: the agent's own conclusion stands"
            )
        roots = context.roots
        files, unreadable = await asyncio.to_thread(
            _still_allowed, state.relevant_files or state.files_checked, roots
        )
        prompt = expert_prompt(
            self.expert_task(state), state, self.min_severity(state), evidence.sections,
            files_attached=bool(files),
        )  # fmt: skip
        await context.progress(f"{self.name}: asking the expert model")
        turn = await run_turn(
            context,
            TurnRequest(
                prompt=prompt,
                system_prompt=self.expert_role,
                model=arguments.model,
                continuation_id=thread_id,
                files=files,
            ),
        )
        metadata = dict(turn.metadata)
        if unreadable:
            skipped = metadata.setdefault("files_skipped", [])
            skipped.extend({"path": p, "reason": r} for p, r in unreadable)
        return Completion(expert_analysis=turn.text, metadata=metadata)

    def _result(
        self, thread_id: str, state: WorkflowState, evidence: Evidence, arguments: WorkflowInput
    ) -> ToolResult:
        response: dict[str, Any] = {
            "status": "complete" if state.status == "complete" else "in_progress",
            "tool": self.name,
            "continuation_id": thread_id,
            "step_number": state.last_step,
            "total_steps": state.total_steps,
            "next_step_required": state.status != "complete",
            "consolidated": self.summary(state),
            **evidence.response,
        }
        metadata: dict[str, Any] = {**evidence.metadata}
        completion = state.completion
        if completion is None:
            response["next"] = next_step(
                state,
                self.areas(state.options),
                self.advice(state),
                use_assistant_model=arguments.use_assistant_model,
            )
        else:
            response["expert_analysis"] = completion.expert_analysis
            if completion.skipped_because:
                response["expert_skipped"] = completion.skipped_because
            response["next"] = self.conclusion
            metadata.update(completion.metadata)
        metadata["continuation_id"] = thread_id
        metadata["workflow"] = {
            "status": response["status"],
            "step_number": state.last_step,
            "total_steps": state.total_steps,
        }
        return ToolResult(json.dumps(response, indent=2, ensure_ascii=False), metadata=metadata)


def _still_allowed(paths: list[str], roots: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Split paths recorded in earlier steps into those still readable and the rest.

    A file may have been deleted, or the roots changed by a restart, since the
    step that named it; that is reported beside the answer, not a reason to fail.
    """
    ok: list[str] = []
    refused: list[tuple[str, str]] = []
    for path in paths:
        try:
            check_paths([path], roots)
        except ExaiError as exc:
            refused.append((path, exc.message))
        else:
            ok.append(path)
    return ok, refused
