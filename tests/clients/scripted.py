"""The scripted "model" behind the real-client tests' API stand-ins.

A TEST FIXTURE. Claude Code and Codex each talk to a model API; in these tests
that API is a local stand-in (``anthropic_api.py``, ``responses_api.py``) whose
replies come from a :class:`Script`: a list of exai tool calls the model makes
in order, each of which may depend on what the client handed back for the
earlier ones. The stand-ins derive where the script is from the conversation
the client sends, as a real model would, and record every tool result the
client showed its model as an :class:`Observation`. Those observations are what
the tests assert on: exactly the text a real model would have read.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Call", "Observation", "Script", "continuation_id_in", "write_transcript"]

_CONTINUATION = re.compile(r'continuation_id\\?"?\s*[:=]\s*\\?"?([A-Za-z0-9_-]{6,})')


def continuation_id_in(text: str) -> str | None:
    """The ``continuation_id`` a model would read off a tool result, if it shows one."""
    match = _CONTINUATION.search(text)
    return match[1] if match else None


@dataclass
class Call:
    """One exai tool call the scripted model makes.

    ``arguments`` is either the arguments, or a function of the texts the model
    has seen so far (one per earlier call), as a model reading a result would.
    """

    tool: str
    arguments: dict[str, Any] | Callable[[list[str]], dict[str, Any]]
    # Keywords a client that defers tools (Claude Code) searches for this one with.
    search: str | None = None

    def resolve(self, seen: list[str]) -> dict[str, Any]:
        return self.arguments(seen) if callable(self.arguments) else dict(self.arguments)


@dataclass
class Observation:
    """A tool result as the client handed it to its model."""

    tool: str  # the name the client gave the tool, e.g. mcp__exai__chat
    text: str
    is_error: bool


@dataclass
class Script:
    """The calls to make, in order; then a final answer that ends the turn."""

    calls: list[Call]
    final: str = "done"
    observations: list[Observation] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def next_call(self, seen: list[str]) -> Call | None:
        """The call after ``len(seen)`` results, or None when the script is over."""
        return self.calls[len(seen)] if len(seen) < len(self.calls) else None

    def observe(self, observation: Observation) -> None:
        with self._lock:
            if observation not in self.observations:
                self.observations.append(observation)

    def texts(self) -> list[str]:
        with self._lock:
            return [o.text for o in self.observations]

    @staticmethod
    def arguments_json(arguments: dict[str, Any]) -> str:
        return json.dumps(arguments, ensure_ascii=False)


TRANSCRIPTS = Path(__file__).parents[2] / "build" / "real-clients"


def write_transcript(client: str, observations: list[Observation]) -> None:
    """Append what ``client``'s model saw to build/real-clients/<client>.md, for people to read."""
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    with open(TRANSCRIPTS / f"{client}.md", "a") as out:
        out.write(f"## {test}\n\n")
        for o in observations:
            flag = " (is_error)" if o.is_error else ""
            out.write(f"{o.tool}{flag}:\n\n```\n{o.text}\n```\n\n")
