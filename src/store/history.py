"""Building the message array for one provider call: the only place it happens.

Providers remember nothing, so every call sends the conversation again. The array
is, in order:

1. the system prompt;
2. a note (a system message) saying how many earlier turns were left out, when any were;
3. the newest prior turns that fit, oldest first;
4. the files referenced anywhere in the thread, read fresh now (a file referenced
   twice appears once, and the newest reference decides its priority);
5. the new input.

Room is reserved first for the reply (the model's maximum output), the system
prompt, the new input and the note; files come next, and prior turns get what is
left, newest first. A turn is kept or dropped whole, so an assistant message with
``tool_calls`` is never separated from its tool results. Everything is priced with
:mod:`exai.store.tokens`, which never undercounts, so an array built here fits the
model's window.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Protocol

from exai.errors import ContextTooLongError, ExaiError, InternalError, ValidationError_
from exai.store.base import ConversationStore, Owner, ThreadContext
from exai.store.tokens import MAX_CHARS_PER_TOKEN, TokenEstimator, estimator_for

__all__ = [
    "AssembledMessages",
    "ContextLimits",
    "FileBundleLike",
    "FileReader",
    "assemble_messages",
    "fit_turns",
    "thread_system_prompt",
]

_NOTE = (
    "Note: the {dropped} earliest turns of this conversation are left out because they "
    "do not fit the model's context window; the {kept} most recent turns follow."
)
_FILES_HEADER = "Files referenced in this conversation, with their current contents:"


class FileBundleLike(Protocol):
    """What :func:`exai.files.read_files` returns."""

    blocks: list[str]
    included: list[str]
    skipped: list[tuple[str, str]]


FileReader = Callable[[list[str], list[str], int, Callable[[str], int]], FileBundleLike]


@dataclass(frozen=True, slots=True)
class ContextLimits:
    """The model's window, the room kept for its reply, and its tokenizer family.

    ``family`` is ``kimi``, ``glm``, ``generic`` or a model id to infer it from.
    """

    context_window: int
    max_output_tokens: int
    family: str = "generic"


@dataclass(frozen=True, slots=True)
class AssembledMessages:
    messages: list[dict[str, Any]]
    estimated_tokens: int
    turns_included: int = 0
    turns_dropped: int = 0
    files_included: list[str] = field(default_factory=list)
    files_skipped: list[tuple[str, str]] = field(default_factory=list)


def _input_messages(
    new_input: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    if isinstance(new_input, str):
        return [{"role": "user", "content": new_input}]
    if isinstance(new_input, Mapping):
        return [dict(new_input)]
    messages = [dict(m) for m in new_input]
    if not messages:
        raise ValidationError_("the new input holds no message")
    return messages


def thread_system_prompt(system_prompt: str | None, memory_block: str | None) -> str | None:
    """A thread's system prompt: the tool's own, then the thread's frozen memory block.

    The block (see :mod:`exai.memory.block`) is fixed when the thread starts and
    replayed as stored; the tool's prompt comes first so that threads of one
    tool share the longest possible prefix.
    """
    if not memory_block:
        return system_prompt
    if not system_prompt:
        return memory_block
    return f"{system_prompt}\n\n{memory_block}"


def fit_turns(context: ThreadContext, budget_tokens: int) -> tuple[list[dict[str, Any]], int, int]:
    """The newest whole turns of ``context`` costing at most ``budget_tokens``.

    Returns the provider messages kept, oldest first, their estimated cost, and how
    many turns they span. A turn is kept or dropped whole, and a tool result always
    stays with the message before it, so a tool-call round split across turns
    stays together too. Stops at the first turn that does not fit, so the kept
    turns are always the contiguous newest ones; tool results at the very start,
    whose call was not loaded, are never sent alone.
    """
    messages, turns, tokens = context.messages, context.turns, context.tokens
    count = len(messages)
    # Costs of the newest 1, 2, 3... messages; the longest suffix within budget.
    suffix = list(accumulate(reversed(tokens)))
    start = count - bisect_right(suffix, budget_tokens)

    def inside_group(index: int) -> bool:
        return 0 < index < count and (
            turns[index] == turns[index - 1] or messages[index]["role"] == "tool"
        )

    while inside_group(start):
        start += 1
    if start < count and messages[start]["role"] == "tool":
        start += 1
        while inside_group(start):
            start += 1
    spent = sum(tokens[start:])
    kept_turns = len(set(turns[start:]))
    return messages[start:], spent, kept_turns


@dataclass(slots=True)
class _FilesRead:
    blocks: list[str] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)  # estimated tokens of each block
    included: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def add(self, bundle: FileBundleLike, estimator: TokenEstimator) -> int:
        costs = [estimator.text(block) for block in bundle.blocks]
        self.blocks.extend(bundle.blocks)
        self.costs.extend(costs)
        self.included.extend(bundle.included)
        self.skipped.extend(bundle.skipped)
        return sum(costs) + len(costs)


def _read_referenced(
    reader: FileReader,
    new: list[str],
    earlier: list[str],
    roots: list[str],
    budget: int,
    estimator: TokenEstimator,
) -> _FilesRead:
    """Read the new input's files, then the thread's earlier ones, newest first.

    A bad path in the new input is the caller's error and raises. A file an
    earlier turn referenced may since have been deleted or left the allowed roots;
    that is no reason to refuse the call, so it is skipped with the reason.
    """
    read = _FilesRead()
    if new:
        budget -= read.add(reader(new, roots, budget, estimator.text), estimator)
    for path in earlier:
        try:
            bundle = reader([path], roots, max(0, budget), estimator.text)
        except ExaiError as exc:
            read.skipped.append((path, exc.message))
            continue
        budget -= read.add(bundle, estimator)
    return read


def _default_reader() -> FileReader:
    try:
        from exai.files import read_files
    except ImportError as exc:
        raise InternalError(f"the file reader is unavailable: {exc}") from exc
    return read_files


async def assemble_messages(
    *,
    system_prompt: str | None,
    new_input: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
    limits: ContextLimits,
    store: ConversationStore | None = None,
    thread_id: str | None = None,
    owner: Owner | None = None,
    files: Sequence[str] = (),
    roots: Sequence[str] = (),
    read_files: FileReader | None = None,
    memory_block: str | None = None,
) -> AssembledMessages:
    """The provider message array for a call, continuing ``thread_id`` when given.

    ``files`` are the paths the new input references; with the thread's own
    references they are read through ``read_files`` (by default
    :func:`exai.files.read_files`) within ``roots``. Raises
    :class:`~exai.errors.ContextTooLongError` when the system prompt and the new
    input alone leave no room for the reply, and
    :class:`~exai.errors.ConversationNotFoundError` for a thread the owner cannot use.
    ``memory_block`` is the thread's frozen memory block, placed by
    :func:`thread_system_prompt`.
    """
    estimator = estimator_for(limits.family)
    system_prompt = thread_system_prompt(system_prompt, memory_block)
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    tail = _input_messages(new_input)
    note_cost = estimator.message(
        {"role": "system", "content": _NOTE.format(dropped=10**9, kept=10**9)}
    )
    fixed = estimator.messages([*head, *tail])
    room = limits.context_window - limits.max_output_tokens - fixed
    if room < 0:
        raise ContextTooLongError(
            f"the prompt needs about {fixed} tokens and {limits.max_output_tokens} are kept "
            f"for the reply, more than the model's {limits.context_window}-token context "
            "window; shorten the prompt or choose a model with a larger window",
            details={"estimated_tokens": fixed, "context_window": limits.context_window,
                     "max_output_tokens": limits.max_output_tokens},
        )  # fmt: skip
    room = max(0, room - note_cost)

    context = None
    if thread_id is not None:
        if store is None or owner is None:
            raise ValueError("continuing a thread needs the store and the owner")
        context = await store.load_context(
            thread_id, owner, max_chars=int(room * MAX_CHARS_PER_TOKEN),
            family=estimator.family,
        )  # fmt: skip

    earlier = [p for p in dict.fromkeys(context.files if context else ()) if p not in files]
    file_messages: list[dict[str, Any]] = []
    files_read = _FilesRead()
    files_cost = 0
    if files or earlier:
        overhead = estimator.message({"role": "user", "content": _FILES_HEADER + "\n\n"})
        files_read = await asyncio.to_thread(
            _read_referenced, read_files or _default_reader(), list(dict.fromkeys(files)),
            earlier, list(roots), max(0, room - overhead), estimator,
        )  # fmt: skip
        # Priced block by block, as the reader priced them, plus a token for each
        # separator; blocks beyond the room left (a reader overshooting) are dropped.
        files_cost = overhead + sum(files_read.costs) + len(files_read.costs)
        while files_read.blocks and files_cost > room:
            files_cost -= files_read.costs.pop() + 1
            files_read.blocks.pop()
            files_read.skipped.append((files_read.included.pop(), "over token budget"))
        if files_read.blocks:
            text = _FILES_HEADER + "\n\n" + "\n\n".join(files_read.blocks)
            file_messages = [{"role": "user", "content": text}]
            room -= files_cost
        else:
            files_cost = 0

    history: list[dict[str, Any]] = []
    kept_turns = dropped = history_cost = 0
    if context is not None:
        history, history_cost, kept_turns = fit_turns(context, room)
        dropped = max(0, context.thread.turns - kept_turns)
    note = (
        [{"role": "system", "content": _NOTE.format(dropped=dropped, kept=kept_turns)}]
        if dropped
        else []
    )
    messages = [*head, *note, *history, *file_messages, *tail]
    return AssembledMessages(
        messages=messages,
        estimated_tokens=fixed + history_cost + files_cost + (note_cost if note else 0),
        turns_included=kept_turns,
        turns_dropped=dropped,
        files_included=files_read.included,
        files_skipped=files_read.skipped,
    )
