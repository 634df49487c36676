"""What a workflow says: to the agent after each step, and to the expert at the end.

Pure functions of the stored :class:`WorkflowState`, so a replayed step renders
exactly what the first attempt did. Intermediate answers are what keeps an agent
investigating rather than concluding early: the consolidated picture so far and
concrete areas to examine next, taken from the tool's checklist and spread over
the steps the agent planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil
from typing import Any

from exai.tools.workflow.inputs import CONFIDENCE_LEVELS, SEVERITY_ORDER, Issue
from exai.tools.workflow.state import WorkflowState

__all__ = ["consolidated", "expert_prompt", "next_step", "visible_issues"]

_CONFIDENT = CONFIDENCE_LEVELS.index("high")


def visible_issues(issues: Sequence[Issue], minimum: str | None) -> tuple[list[Issue], int]:
    """Issues at or above ``minimum`` severity, most severe first, and how many were hidden."""
    limit = SEVERITY_ORDER.get(minimum or "low", 3)
    shown = [i for i in issues if SEVERITY_ORDER[i.severity] <= limit]
    shown.sort(key=lambda i: SEVERITY_ORDER[i.severity])
    return shown, len(issues) - len(shown)


def consolidated(state: WorkflowState, minimum: str | None = None) -> dict[str, Any]:
    """Everything the agent has reported so far, merged across steps."""
    issues, hidden = visible_issues(state.issues, minimum)
    summary: dict[str, Any] = {
        "findings": [f"step {s.step_number}: {s.findings}" for s in state.steps if s.findings],
        "files_checked": state.files_checked,
        "relevant_files": state.relevant_files,
        "relevant_context": state.relevant_context,
        "issues_found": [i.model_dump(exclude_none=True) for i in issues],
        "confidence": state.confidence,
    }
    if hidden:
        summary["issues_below_severity_filter"] = hidden
    if state.hypothesis:
        summary["hypothesis"] = state.hypothesis
    return summary


def next_step(
    state: WorkflowState,
    areas: Sequence[str],
    advice: Sequence[str],
    *,
    use_assistant_model: bool,
) -> dict[str, Any]:
    """What the agent should investigate in its next step, and how to report it.

    The checklist is spread over steps 2..total_steps (step 1 orients), so a
    longer plan examines fewer areas per step; the final step is told to
    confirm and conclude instead.
    """
    n = state.last_step + 1
    total = state.total_steps
    todo: list[str] = []
    if areas:
        per_step = ceil(len(areas) / max(1, total - 1))
        todo += areas[(n - 2) * per_step : (n - 1) * per_step]
    unread = [f for f in state.relevant_files if f not in state.files_checked]
    if unread:
        todo.append("Read the relevant files not yet checked: " + ", ".join(unread))
    if not state.relevant_files and n > 2:
        todo.append("Name the files that matter in relevant_files: only they reach the expert.")
    todo += advice
    if not todo:
        todo.append(
            "Follow up the open questions in your findings; confirm or refute each with "
            "file:line evidence."
        )
    if CONFIDENCE_LEVELS.index(state.confidence) >= _CONFIDENT and n < total:
        todo.append(
            "Your confidence is already high: verify what remains and finish early "
            "(next_step_required=false) rather than exploring further."
        )
    if n >= total:
        expert = (
            "the expert model then reviews your findings and relevant_files"
            if use_assistant_model
            else "the workflow then completes without a model call"
        )
        report = (
            f"This is the final step: confirm every issue with evidence, set confidence, and "
            f"send step_number {n} with next_step_required=false; {expert}."
        )
    else:
        report = (
            f"Investigate on your own first, then send step_number {n} of {total} with this "
            "continuation_id, your new findings, files and issues."
        )
    return {"step_number": n, "investigate": todo, "report": report}


def expert_prompt(
    task: str,
    state: WorkflowState,
    minimum: str | None,
    sections: Sequence[str],
    *,
    files_attached: bool,
) -> str:
    """The one message the expert model receives, files aside (they travel numbered)."""
    parts = [f"# Request\n{task}"]
    steps = [
        f"## Step {s.step_number} (confidence: {s.confidence})\n{s.step}\n\nFindings: "
        + (s.findings or "(none)")
        + (f"\nHypothesis: {s.hypothesis}" if s.hypothesis else "")
        for s in state.steps
    ]
    parts.append("# The agent's investigation\n" + "\n\n".join(steps))
    issues, hidden = visible_issues(state.issues, minimum)
    if issues:
        listed = "\n".join(
            f"- [{i.severity}] {i.description}" + (f" ({i.location})" if i.location else "")
            for i in issues
        )
        note = f"\n({hidden} less severe issues left out by the severity filter)" if hidden else ""
        parts.append(f"# Issues found by the agent\n{listed}{note}")
    if state.relevant_context:
        parts.append(
            "# Relevant code context\n" + "\n".join(f"- {c}" for c in state.relevant_context)
        )
    if state.hypothesis:
        parts.append(f"# Current hypothesis\n{state.hypothesis}")
    parts.append(f"# Agent's confidence\n{state.confidence}")
    if state.files_checked:
        parts.append("# Files the agent examined\n" + "\n".join(state.files_checked))
    parts.extend(sections)
    if files_attached:
        parts.append(
            "The relevant files are provided above with numbered lines; cite them as path:line."
        )
    parts.append("Verify the agent's findings against the evidence rather than trusting them.")
    return "\n\n".join(parts)
