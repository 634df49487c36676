"""Helpers shared by the workflow tool tests: step arguments, git repositories, and
reading back what the emulated model was sent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from exai.protocol import CallToolResult

__all__ = [
    "WORKFLOW_TOOLS",
    "git",
    "make_repo",
    "payload",
    "sent_text",
    "step",
    "tool_extras",
]

WORKFLOW_TOOLS = [
    "thinkdeep", "analyze", "codereview", "debug", "planner", "precommit",
    "refactor", "secaudit", "testgen", "tracer", "docgen",
]  # fmt: skip


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com",
         "-c", "init.defaultBranch=main", "-C", str(repo), *args],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout


def make_repo(path: Path) -> Path:
    """A repository with one commit of ``app.py``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "app.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    git(path, "add", "app.py")
    git(path, "commit", "-q", "-m", "first")
    return path


def tool_extras(tool: str, tmp_path: Path) -> dict[str, Any]:
    """Arguments a tool needs beyond the common ones (precommit: a repository)."""
    if tool == "precommit":
        repo = tmp_path / "repo"
        if not (repo / ".git").exists():
            make_repo(repo)
        return {"path": str(repo)}
    return {}


def step(
    number: int,
    total: int,
    *,
    final: bool = False,
    cid: str | None = None,
    tool: str = "codereview",
    **fields: Any,
) -> dict[str, Any]:
    """One step's arguments; debug gets the hypothesis it requires from step 2."""
    args: dict[str, Any] = {
        "step": f"step {number}",
        "step_number": number,
        "total_steps": total,
        "next_step_required": not final,
        "findings": f"findings of step {number}",
    }
    if cid is not None:
        args["continuation_id"] = cid
    if tool == "debug" and number > 1:
        args["hypothesis"] = "the cache is never invalidated"
    args.update(fields)
    return args


def payload(result: CallToolResult) -> dict[str, Any]:
    assert result.error is None, result.error
    return json.loads(result.outputs[0].text)


def sent_text(request: dict[str, Any]) -> str:
    """Every message the model received, joined."""
    return "\n".join(str(m.get("content") or "") for m in request["body"]["messages"])
