"""``planner``: a plan built one step at a time, with revisions and branches.

Each step is a plan step. A step may revise an earlier one (the earlier one is
then shown as superseded) or open a branch from an earlier step to explore an
alternative; later steps continue a branch by naming it. Branches and revisions
are recorded with the steps in the workflow's stored state.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from exai.errors import ValidationError_
from exai.tools.workflow.engine import WorkflowTool
from exai.tools.workflow.inputs import WorkflowInput
from exai.tools.workflow.report import consolidated
from exai.tools.workflow.state import WorkflowState

__all__ = ["PlannerInput", "PlannerTool"]


class PlannerInput(WorkflowInput):
    is_step_revision: bool = False
    revises_step_number: int | SkipJsonSchema[None] = Field(default=None, ge=1)
    branch_from_step: int | SkipJsonSchema[None] = Field(
        default=None, ge=1, description="Open branch_id here."
    )
    branch_id: str | SkipJsonSchema[None] = Field(
        default=None, max_length=64, description="Branch this step belongs to."
    )

    @model_validator(mode="after")
    def _consistent(self) -> PlannerInput:
        if self.is_step_revision != (self.revises_step_number is not None):
            raise ValueError("is_step_revision and revises_step_number go together")
        if self.revises_step_number is not None and self.revises_step_number >= self.step_number:
            raise ValueError("revises_step_number must name an earlier step")
        if self.branch_from_step is not None:
            if not self.branch_id:
                raise ValueError("branch_from_step needs a branch_id naming the new branch")
            if self.branch_from_step >= self.step_number:
                raise ValueError("branch_from_step must name an earlier step")
        return self


class PlannerTool(WorkflowTool):
    name = "planner"
    description = (
        "Plan a task step by step, with revisions and branches; the final step gets a Kimi "
        "or GLM expert's critique of the plan."
    )
    Input = PlannerInput
    expert_role = (
        "You are a staff engineer reviewing a plan before work starts. Look for missing "
        "steps, wrong ordering, hidden dependencies, risks and steps that cannot be verified."
    )
    checklist = (
        "Define the goal, scope and constraints.",
        "Break the work into ordered steps that can each be verified.",
        "Find dependencies and risks; branch where approaches diverge.",
        "Revise any step that new information invalidates.",
        "Define how the whole result will be verified and rolled back.",
    )
    conclusion = "Present the final plan as ordered steps; note open branches and risks."

    def check_step(self, arguments: WorkflowInput, state: WorkflowState) -> dict[str, Any]:
        assert isinstance(arguments, PlannerInput)
        branches = _branches(state)
        branch = arguments.branch_id
        if branch and arguments.branch_from_step is None and branch not in branches:
            raise ValidationError_(
                f"unknown branch {branch!r}: open it with branch_from_step first"
                + (f" (known: {', '.join(branches)})" if branches else ""),
                details={"field": "branch_id"},
            )
        if branch and arguments.branch_from_step is not None and branch in branches:
            raise ValidationError_(
                f"branch {branch!r} already exists (from step {branches[branch]}); "
                "continue it without branch_from_step or choose a new branch_id",
                details={"field": "branch_id"},
            )
        extra: dict[str, Any] = {}
        if branch:
            extra["branch_id"] = branch
        if arguments.branch_from_step is not None:
            extra["branch_from_step"] = arguments.branch_from_step
        if arguments.revises_step_number is not None:
            extra["revises_step_number"] = arguments.revises_step_number
        return extra

    def summary(self, state: WorkflowState) -> dict[str, Any]:
        revised = {
            s.extra["revises_step_number"]: s.step_number
            for s in state.steps
            if "revises_step_number" in s.extra
        }
        plan = []
        for s in state.steps:
            item: dict[str, Any] = {"step_number": s.step_number, "step": s.step, **s.extra}
            if s.step_number in revised:
                item["superseded_by"] = revised[s.step_number]
            plan.append(item)
        summary = consolidated(state)
        summary["plan"] = plan
        summary["branches"] = _branches(state)
        return summary

    def expert_task(self, state: WorkflowState) -> str:
        lines = []
        for item in self.summary(state)["plan"]:
            marks = []
            if "branch_id" in item:
                marks.append(f"branch {item['branch_id']}")
            if "revises_step_number" in item:
                marks.append(f"revises step {item['revises_step_number']}")
            if "superseded_by" in item:
                marks.append(f"superseded by step {item['superseded_by']}")
            suffix = f" [{'; '.join(marks)}]" if marks else ""
            lines.append(f"{item['step_number']}. {item['step']}{suffix}")
        return (
            "Critique this plan and give an improved version: missing or misordered steps, "
            "risks, and how each step is verified. Where branches compete, recommend one.\n\n"
            + "\n".join(lines)
        )


def _branches(state: WorkflowState) -> dict[str, int]:
    return {
        s.extra["branch_id"]: s.extra["branch_from_step"]
        for s in state.steps
        if "branch_from_step" in s.extra
    }
