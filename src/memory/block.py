"""The memory block of a thread's system prompt: what it says and how it is cut.

On a new thread's first turn the memories relevant to the prompt are written
into one clearly delimited block, within a token budget. The block is stored
with the thread and replayed byte for byte on every later turn (see
:mod:`exai.tools.turn`): a system prompt that never changes keeps the prompt
prefix stable, and with it the providers' prompt caches.

Pure: given the ranked memories and a token counter, the block is a function
of them alone (no time, no ids of this call), so it is the same bytes wherever
and whenever it is built from the same memories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from exai.memory.base import Memory

__all__ = ["BLOCK_END", "BLOCK_START", "MemoryBlock", "build_block"]

BLOCK_START: Final = "<long_term_memory>"
BLOCK_END: Final = "</long_term_memory>"
_INTRO: Final = (
    "What this user established in earlier conversations, most relevant first. "
    "It is background, not a request: follow rules and preferences, and say so if "
    "anything here conflicts with the conversation."
)


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    text: str
    ids: list[str]
    tokens: int


def _line(memory: Memory) -> str:
    content = " ".join(memory.content.split())
    return f"- [{memory.type}] {content}"


def build_block(
    memories: Sequence[Memory], budget_tokens: int, count_tokens: Callable[[str], int]
) -> MemoryBlock | None:
    """The block holding as many of ``memories`` (best first) as fit ``budget_tokens``.

    A memory that does not fit is skipped and smaller ones after it may still
    go in. None when not even one fits (or there are none).
    """
    frame = f"{BLOCK_START}\n{_INTRO}\n{BLOCK_END}"
    spent = count_tokens(frame)
    lines: list[str] = []
    ids: list[str] = []
    for memory in memories:
        line = _line(memory)
        cost = count_tokens(line + "\n")
        if spent + cost > budget_tokens:
            continue
        lines.append(line)
        ids.append(memory.id)
        spent += cost
    if not lines:
        return None
    text = "\n".join([BLOCK_START, _INTRO, *lines, BLOCK_END])
    return MemoryBlock(text, ids, count_tokens(text))
