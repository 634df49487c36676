"""The conversations every real client is put through, and what its model must have seen.

A TEST FIXTURE shared by the Claude Code and Codex tests: each scenario is a
list of scripted :class:`~tests.clients.scripted.Call` s plus a check on the
:class:`~tests.clients.scripted.Observation` s the client handed its model.
The checks hold whichever of ``content`` or ``structuredContent`` the client
passes on, because they look only at the text the model received.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exai.emulators.provider import EmulatorServer
from tests.clients.scripted import Call, Observation, continuation_id_in
from tests.shim.helpers import DaemonProcess

__all__ = [
    "chat_turns",
    "check_chat_turns",
    "check_consensus",
    "check_review_step",
    "check_tool_not_found",
    "check_validation_error",
    "consensus_call",
    "review_step",
    "tool_not_found_call",
    "validation_error_call",
]

FIRST = "Which is larger, 7 or 9?"
SECOND = "And which of them is prime?"


def chat_turns(search: str | None = None) -> list[Call]:
    """Two ``chat`` turns; the second continues with the id the model read off the first."""

    def second(seen: list[str]) -> dict[str, Any]:
        return {"prompt": SECOND, "continuation_id": continuation_id_in(seen[-1]) or "not-seen"}

    return [Call("chat", {"prompt": FIRST}, search=search), Call("chat", second)]


def check_chat_turns(seen: list[Observation], emulator: EmulatorServer) -> None:
    assert len(seen) == 2, seen
    first, second = seen
    assert not first.is_error and not second.is_error, seen
    # The answer itself, not only metadata about it.
    assert f"emulated reply #1 to: {FIRST}" in first.text, first.text
    thread = continuation_id_in(first.text)
    assert thread, first.text
    assert "continue" in first.text.lower(), first.text  # how to use the id
    # Turn 2 saw turn 1: the emulator numbers the user turns it was sent.
    assert f"emulated reply #2 to: {SECOND}" in second.text, second.text
    assert continuation_id_in(second.text) == thread
    last = [r for r in emulator.requests if r["path"].endswith("/chat/completions")][-1]
    sent = " ".join(str(m.get("content")) for m in last["body"]["messages"])
    assert FIRST in sent and f"emulated reply #1 to: {FIRST}" in sent and SECOND in sent


def review_step(project: Path) -> Call:
    source = project / "calc.py"
    source.write_text("def div(a, b):\n    return a / b\n")
    return Call("codereview", {
        "step": "Review calc.py for correctness.",
        "step_number": 1,
        "total_steps": 2,
        "next_step_required": True,
        "findings": "div does not guard against b == 0.",
        "relevant_files": [str(source)],
        "issues_found": [{"severity": "medium", "description": "division by zero",
                          "location": f"{source}:2"}],
    }, search="code review")  # fmt: skip


def check_review_step(seen: list[Observation]) -> None:
    (step,) = seen
    assert not step.is_error, step.text
    text = step.text
    assert continuation_id_in(text), text
    assert "in_progress" in text and "division by zero" in text, text
    # The instructions for the next step, which the calling model must follow.
    assert "step 2" in text.lower() or "step_number" in text, text
    assert "next_step_required" in text, text


def consensus_call() -> Call:
    return Call("consensus", {
        "prompt": "Should the store use SQLite by default?",
        "models": [{"model": "kimi", "stance": "for"}, {"model": "glm", "stance": "against"}],
    }, search="consensus several models")  # fmt: skip


def check_consensus(seen: list[Observation]) -> None:
    (result,) = seen
    assert not result.is_error, result.text
    assert "Should the store use SQLite by default?" in result.text, result.text
    assert continuation_id_in(result.text), result.text
    assert "kimi" in result.text.lower() and "glm" in result.text.lower(), result.text


def validation_error_call() -> Call:
    return Call("chat", {"prompt": "hi", "temperature": "very hot"}, search="chat kimi glm")


def check_validation_error(seen: list[Observation]) -> None:
    (result,) = seen
    assert result.is_error, result
    assert "VALIDATION_ERROR" in result.text and "temperature" in result.text, result.text


def tool_not_found_call(daemon: DaemonProcess) -> Call:
    """``echo`` is listed when the client starts, then gone: the daemon restarts without it.

    A client checks names against the list it holds, so an unknown tool reaches
    the daemon only when that list is stale, which is the case made here.
    """

    def restart_without_echo(seen: list[str]) -> dict[str, Any]:
        daemon.stop()
        daemon.start(EXAI_TOOLS_DENY="echo")
        return {"text": "still there?"}

    return Call("echo", restart_without_echo, search="echo")


def check_tool_not_found(seen: list[Observation]) -> None:
    (result,) = seen
    assert result.is_error, result
    assert "TOOL_NOT_FOUND" in result.text and "echo" in result.text, result.text
