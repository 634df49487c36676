"""Workflows that answer a question: ``thinkdeep``, ``analyze``, ``debug`` and ``tracer``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from exai.tools.workflow.engine import WorkflowTool
from exai.tools.workflow.inputs import WorkflowInput
from exai.tools.workflow.state import WorkflowState

__all__ = [
    "AnalyzeInput",
    "AnalyzeTool",
    "DebugInput",
    "DebugTool",
    "ThinkDeepInput",
    "ThinkDeepTool",
    "TracerInput",
    "TracerTool",
]

_PARTNER = (
    "You are a senior engineer and thinking partner brought in at the end of another "
    "engineer's investigation. Build on their evidence, challenge weak reasoning, cite "
    "path:line, and say plainly where you are unsure."
)


class ThinkDeepInput(WorkflowInput):
    focus_areas: list[str] = Field(default_factory=list, description="e.g. performance, risk.")


class ThinkDeepTool(WorkflowTool):
    name = "thinkdeep"
    description = (
        "Think a hard problem through over several steps, then get a second opinion from "
        "Kimi or GLM on the final step: for design questions, trade-offs, tricky reasoning."
    )
    Input = ThinkDeepInput
    expert_role = _PARTNER
    checklist = (
        "State the problem, its constraints and what success looks like.",
        "Challenge the assumptions; list the alternatives.",
        "Find evidence in the code for and against the current thinking.",
        "Weigh trade-offs: risk, cost, complexity, reversibility.",
        "Name what would change the conclusion.",
    )
    conclusion = "Weigh the expert's view against yours and present a reasoned conclusion."

    def expert_task(self, state: WorkflowState) -> str:
        focus = state.options.get("focus_areas") or []
        on = f", focusing on {', '.join(focus)}" if focus else ""
        return (
            f"Think more deeply about the problem{on}. Extend or correct the agent's reasoning, "
            "surface blind spots and alternatives, and end with a recommendation and its risks."
        )


class AnalyzeInput(WorkflowInput):
    analysis_type: Literal["architecture", "performance", "security", "quality", "general"] = (
        "general"
    )


_ANALYSIS_AREAS: dict[str, tuple[str, ...]] = {
    "architecture": (
        "Components, their responsibilities and boundaries.",
        "Dependency direction, coupling and cycles.",
        "Data flow and where state lives.",
        "Extension points and what is hard to change.",
    ),
    "performance": (
        "Hot paths and their complexity.",
        "I/O, blocking and concurrency.",
        "Memory use and caching.",
    ),
    "security": (
        "Attack surface and trust boundaries.",
        "Handling of untrusted input and secrets.",
        "Authorization model.",
    ),
    "quality": (
        "Readability and consistency.",
        "Error handling and edge cases.",
        "Test coverage and testability.",
    ),
    "general": (
        "Structure: components, responsibilities, boundaries.",
        "Data flow and dependencies.",
        "Quality: error handling, tests, consistency.",
        "Risks: performance, security, maintainability.",
    ),
}


class AnalyzeTool(WorkflowTool):
    name = "analyze"
    description = (
        "Analyze code step by step (architecture, performance, security, quality); the "
        "final step gets a Kimi or GLM expert's assessment of the files you name."
    )
    Input = AnalyzeInput
    expert_role = _PARTNER
    conclusion = "Present the analysis: strengths, risks, and recommendations by priority."

    def areas(self, options: dict[str, Any]) -> tuple[str, ...]:
        return _ANALYSIS_AREAS[options.get("analysis_type", "general")]

    def expert_task(self, state: WorkflowState) -> str:
        kind = state.options.get("analysis_type", "general")
        return (
            f"Give a {kind} analysis of the relevant code: what is sound, what is risky, "
            "and prioritized, concrete recommendations with path:line."
        )


class DebugInput(WorkflowInput):
    @model_validator(mode="after")
    def _hypothesis_after_step_1(self) -> DebugInput:
        if self.step_number > 1 and not (self.hypothesis or "").strip():
            raise ValueError(
                "hypothesis is required from step 2 on: state your current theory of the cause"
            )
        return self


class DebugTool(WorkflowTool):
    name = "debug"
    description = (
        "Find a bug's root cause step by step, a hypothesis per step; the final step gets a "
        "Kimi or GLM expert's diagnosis. For errors, failing tests, crashes."
    )
    Input = DebugInput
    expert_role = (
        "You are an expert debugger. Find the root cause, not a symptom: test the agent's "
        "hypothesis against the code, cite path:line, and propose the minimal fix and a test "
        "that would have caught the bug."
    )
    checklist = (
        "Pin down the symptom: exact error, inputs, environment, when it started.",
        "Trace the failing path from the entry point to the symptom.",
        "Form testable hypotheses and rank them by likelihood.",
        "Test the leading hypothesis against code, logs and recent changes.",
        "Rule out the alternatives; confirm the root cause.",
    )
    conclusion = "Present the root cause with evidence and the minimal fix; ask before applying it."

    def advice(self, state: WorkflowState) -> list[str]:
        recent = [s.hypothesis for s in state.steps[-2:] if s.hypothesis]
        if len(recent) == 2 and recent[0] == recent[1] and state.confidence in ("exploring", "low"):
            return [
                "Your hypothesis has not moved in two steps at low confidence: test it "
                "directly or replace it."
            ]
        if not state.hypothesis:
            return ["State a testable hypothesis in the next step (it is required from step 2)."]
        return []

    def expert_task(self, state: WorkflowState) -> str:
        return (
            "Diagnose the bug. Say whether the agent's hypothesis is right; if not, give the "
            "most likely root cause with evidence. Then give the minimal fix and how to verify it."
        )


class TracerInput(WorkflowInput):
    trace_mode: Literal["precision", "dependencies"] = Field(
        default="precision", description="precision: call flow; dependencies: structure."
    )


_TRACE_AREAS: dict[str, tuple[str, ...]] = {
    "precision": (
        "Find the target's definition and its entry points.",
        "Follow the calls it makes, in order, with their conditions.",
        "Note side effects: state changed, I/O, errors raised.",
        "Find its callers and how results are used.",
    ),
    "dependencies": (
        "Find what the target imports and depends on.",
        "Find what depends on the target.",
        "Map the types and data passed across those edges.",
    ),
}


class TracerTool(WorkflowTool):
    name = "tracer"
    description = (
        "Trace a function's call flow or a component's dependencies step by step; the final "
        "step gets a Kimi or GLM expert's check."
    )
    Input = TracerInput
    profile = "full"
    expert_role = _PARTNER
    conclusion = "Present the trace as an ordered call chain or dependency map with path:line."

    def areas(self, options: dict[str, Any]) -> tuple[str, ...]:
        return _TRACE_AREAS[options.get("trace_mode", "precision")]

    def expert_task(self, state: WorkflowState) -> str:
        if state.options.get("trace_mode") == "dependencies":
            shape = "a dependency map (incoming and outgoing)"
        else:
            shape = "an ordered call chain with branches and side effects"
        return f"Check and complete the agent's trace as {shape}, with path:line for each node."
