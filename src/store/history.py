"""Building the message array for one provider call: the only place it happens.

Providers remember nothing, so every call sends the conversation again. The array
is, in order:

1. the system prompt;
2. a note (a system message) saying how many earlier turns were left out, when any were;
3. the newest prior turns that fit, oldest first, exactly as they were stored;
4. the files referenced anywhere in the thread, read fresh now (a file referenced
   twice appears once, and the newest reference decides its priority);
5. the new input.

The order is the one that lets the vendors' prompt caches work. Kimi and GLM
bill a prefix they have seen before at a lower price, so the first three parts,
the *stable prefix*, must come out byte for byte the same on the next call of
the thread, with that call's new turn appended after them. Nothing in them
changes from call to call: the system prompt is the tool's (or the thread's
own), the note names only the number of turns dropped, and stored turns are
replayed as stored. Files are the part that does change, since they are read
fresh on every call: they come after the prior turns, with the new input, so a
file edited between two calls changes only bytes after the prefix. A file's
contents are therefore never stored with the turn that referenced it (the
stored user message is the prompt alone), and never cached across calls; the
model always reads the current version, once. Old turns leave the window in
blocks (see :mod:`exai.store.window`), so the prefix moves only now and then.
:mod:`exai.store.prefix` defines the comparison the tests make.

Room is reserved first for the reply (the model's maximum output), the system
prompt, the new input and the note; files come next, and prior turns get what is
left, newest first. A turn is kept or dropped whole, so an assistant message with
``tool_calls`` is never separated from its tool results. Everything is priced with
:mod:`exai.store.tokens`, which never undercounts, so an array built here fits the
model's window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from exai.errors import ContextTooLongError, ExaiError, InternalError, ValidationError_
from exai.store.base import ConversationStore, Owner, ThreadContext
from exai.store.tokens import MAX_CHARS_PER_TOKEN, TokenEstimator, estimator_for
from exai.store.window import DEFAULT_LOW_WATER, HistoryWindow, choose_window

__all__ = [
    "AssembledMessages",
    "ContextLimits",
    "FileBundleLike",
    "FileReader",
    "assemble_messages",
    "thread_system_prompt",
]

# Names only what changes when turns are dropped, so it stays the same, byte for
# byte, on every call until the next block of turns is dropped.
_NOTE = (
    "Note: the {dropped} earliest turns of this conversation are left out because they "
    "do not fit the model's context window."
)
# The thread state entry recording the turn the window began at when turns were
# last dropped, one per window size (consensus asks models with different
# windows on one thread).
_WINDOW_STATE_KEY = "history_window:{family}:{window}:{output}"
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
    """The messages for one call. The first ``stable_messages`` of them (system
    prompt, note, prior turns) are the prefix the next call of the thread repeats
    byte for byte unless it drops turns; the rest (files, new input) are this
    call's own. See :mod:`exai.store.prefix`."""

    messages: list[dict[str, Any]]
    estimated_tokens: int
    stable_messages: int = 0
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
    low_water: float = DEFAULT_LOW_WATER,
    memory_block: str | None = None,
) -> AssembledMessages:
    """The provider message array for a call, continuing ``thread_id`` when given.

    ``files`` are the paths the new input references; with the thread's own
    references they are read through ``read_files`` (by default
    :func:`exai.files.read_files`) within ``roots``. When prior turns must be
    dropped, they are dropped in blocks down to ``low_water`` of the room (see
    :mod:`exai.store.window`); the turn the window then starts at is kept in the
    thread's state, so the next calls send the same prefix. Raises
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
    note_cost = estimator.message({"role": "system", "content": _NOTE.format(dropped=10**9)})
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
    if context is not None and store is not None and thread_id is not None:
        window = await _window(store, thread_id, context, room, limits, estimator, low_water)
        history, history_cost = context.messages[window.start :], window.cost
        kept_turns = len(set(context.turns[window.start :]))
        dropped = max(0, context.thread.turns - kept_turns)
    note = [{"role": "system", "content": _NOTE.format(dropped=dropped)}] if dropped else []
    stable = [*head, *note, *history]
    return AssembledMessages(
        messages=[*stable, *file_messages, *tail],
        estimated_tokens=fixed + history_cost + files_cost + (note_cost if note else 0),
        stable_messages=len(stable),
        turns_included=kept_turns,
        turns_dropped=dropped,
        files_included=files_read.included,
        files_skipped=files_read.skipped,
    )


async def _window(
    store: ConversationStore,
    thread_id: str,
    context: ThreadContext,
    room: int,
    limits: ContextLimits,
    estimator: TokenEstimator,
    low_water: float,
) -> HistoryWindow:
    """The prior turns to send, reading and saving where the window starts.

    The thread's state is only read when turns must be dropped, so a thread that
    fits costs no extra query.
    """
    messages, turns, tokens = context.messages, context.turns, context.tokens
    complete = len(set(turns)) >= context.thread.turns
    if complete:
        whole = choose_window(messages, turns, tokens, room, complete=True)
        if whole.start == 0:
            return whole
    key = _WINDOW_STATE_KEY.format(family=estimator.family, window=limits.context_window,
                                   output=limits.max_output_tokens)  # fmt: skip
    saved = await store.get_state(thread_id, key)
    previous = saved.get("turn") if saved else None
    if not isinstance(previous, int) or isinstance(previous, bool):
        previous = None
    window = choose_window(messages, turns, tokens, room, complete=complete,
                           previous_turn=previous, low_water=low_water)  # fmt: skip
    if window.first_turn is not None and window.first_turn != previous:
        await store.put_state(thread_id, key, {"turn": window.first_turn})
    return window
