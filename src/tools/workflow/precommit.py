"""``precommit``: review a repository's pending changes before they are committed.

The tool reads the changes itself with git (staged, unstaged, or everything
since a ref), so the expert sees exactly what would be committed rather than
the agent's account of it. Every step lists the changed files; the final step
(or a single step with ``next_step_required=false``) sends the diff, within a
size cap, to the expert model. A changed work-tree file with more than one hard
link is listed but never diffed: like the file readers, precommit reads a file
only when it has no other name, which could be outside the allowed roots.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from exai.errors import ValidationError_
from exai.files import acheck_paths
from exai.tools.base import ToolContext
from exai.tools.workflow.engine import Evidence, WorkflowTool
from exai.tools.workflow.git import Diff, GitRepository, Which, find_repository
from exai.tools.workflow.inputs import WorkflowInput
from exai.tools.workflow.state import WorkflowState

__all__ = ["MAX_DIFF_BYTES", "PrecommitInput", "PrecommitTool"]

# All diffs together; a model reviews a large diff poorly anyway, and the rest
# of the prompt (findings, files) needs room too.
MAX_DIFF_BYTES = 400_000

# Files git would read from the work tree for a diff, but which have another name
# that may be outside the allowed roots (the file policy of exai.files).
_LEFT_OUT = "Left out of the diffs: changed files with more than one hard link"
_TITLES: dict[Which, str] = {
    "staged": "Staged changes (git diff --cached)",
    "unstaged": "Unstaged changes (git diff)",
    "compare": "Changes against {ref} (git diff {ref})",
}


class PrecommitInput(WorkflowInput):
    path: str = Field(min_length=1, description="Absolute path inside the git repository.")
    compare_to: str | SkipJsonSchema[None] = Field(
        default=None, max_length=256, description="Diff against this ref instead."
    )
    include_staged: bool = True
    include_unstaged: bool = True

    @field_validator("compare_to")
    @classmethod
    def _plain_ref(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("-") or not value.isprintable() or " " in value):
            raise ValueError("must be a git ref (branch, tag or commit), not an option")
        return value


class PrecommitTool(WorkflowTool):
    name = "precommit"
    description = (
        "Check pending git changes before a commit (staged, unstaged, or against "
        "compare_to): exai reads the diff itself, and the final step gets a Kimi or GLM "
        "expert's verdict."
    )
    Input = PrecommitInput
    expert_role = (
        "You are a principal engineer reviewing a change before it is committed. Look for "
        "bugs, regressions in callers, security problems, secrets, missing tests or docs, and "
        "unrelated or unfinished changes. Cite path:line and say whether it is ready."
    )
    checklist = (
        "Read each changed file around its hunks; note the intent of the change.",
        "Correctness of each change, and callers it may break.",
        "Security: secrets, injection, unsafe defaults in the diff.",
        "Tests and docs updated to match the change.",
        "Leftovers: debug code, TODOs, unrelated edits.",
    )
    conclusion = "Report whether the change is ready to commit and what must change first."

    def expert_task(self, state: WorkflowState) -> str:
        return (
            "Review the pending changes below before they are committed. List issues by "
            "severity (critical, high, medium, low) with path:line and the fix, confirm or "
            "refute the agent's issues, and end with a verdict: ready to commit, or not yet."
        )

    async def evidence(self, arguments: WorkflowInput, context: ToolContext) -> Evidence:
        assert isinstance(arguments, PrecommitInput)
        roots = context.roots
        await acheck_paths([arguments.path], roots)
        repo = await find_repository(arguments.path, roots)
        commit = await repo.resolve_ref(arguments.compare_to) if arguments.compare_to else None
        kinds = _kinds(arguments)
        changes: dict[str, Any] = {}
        leave_out: dict[Which, list[str]] = {}
        for which in kinds:
            found = await repo.changed_files(which, commit)
            changes[which] = [change.line for change in found]
            if which != "staged":  # the others read the work tree
                leave_out[which] = await repo.hard_linked(found)
        changes["untracked (not reviewed)"] = await repo.untracked()
        response: dict[str, Any] = {"repository": repo.root, "changes": changes}
        if not any(changes[which] for which in kinds):
            response["note"] = "git reports no changes to review"
        if linked := sorted({path for paths in leave_out.values() for path in paths}):
            response[_LEFT_OUT] = linked
        evidence = Evidence(response=response, metadata={"repository": repo.root})
        asks_expert = arguments.use_assistant_model and arguments.confidence != "certain"
        if not arguments.next_step_required and asks_expert:
            diffs = await _read_diffs(repo, kinds, commit, leave_out)
            evidence.sections = [_section(d, arguments.compare_to) for d in diffs]
            if linked:
                evidence.sections.append(f"# {_LEFT_OUT}\n" + "\n".join(linked))
            if any(d.truncated for d in diffs):
                evidence.metadata["diff_truncated"] = True
        return evidence


def _kinds(arguments: PrecommitInput) -> list[Which]:
    if arguments.compare_to:
        return ["compare"]
    kinds: list[Which] = []
    if arguments.include_staged:
        kinds.append("staged")
    if arguments.include_unstaged:
        kinds.append("unstaged")
    if not kinds:
        raise ValidationError_(
            "nothing to review: include_staged and include_unstaged are both false and no "
            "compare_to was given",
            details={"field": "include_staged"},
        )
    return kinds


async def _read_diffs(
    repo: GitRepository, kinds: list[Which], commit: str | None, leave_out: dict[Which, list[str]]
) -> list[Diff]:
    diffs: list[Diff] = []
    budget = MAX_DIFF_BYTES
    for which in kinds:
        if budget <= 0:
            diffs.append(Diff(which, "", truncated=True))
            continue
        diff = await repo.diff(which, budget, commit, leave_out.get(which, []))
        budget -= len(diff.text.encode())
        diffs.append(diff)
    return diffs


def _section(diff: Diff, ref: str | None) -> str:
    title = _TITLES[diff.which].format(ref=ref)
    if not diff.text.strip():
        body = "(no changes)" if not diff.truncated else "(left out: the diff size cap was reached)"
        return f"# {title}\n{body}"
    longest = max((len(run) for run in re.findall(r"`+", diff.text)), default=0)
    fence = "`" * max(3, longest + 1)
    note = (
        f"\n[truncated: the diff exceeds the {MAX_DIFF_BYTES}-byte cap; the rest is not shown]"
        if diff.truncated
        else ""
    )
    return f"# {title}\n{fence}diff\n{diff.text.rstrip()}\n{fence}{note}"
