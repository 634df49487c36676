"""Where a thread comes from: forks and imports, and the rules that keep the tree sound.

A thread's ``parent_id`` is set once, when it is created, and must name a thread
that already exists, so parent chains cannot loop. The depth checks here walk the
real chain anyway, because an imported thread could claim any parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from exai.errors import ValidationError_
from exai.sqldb.executor import Dialect, Executor
from exai.store.base import StoredMessage, StoreLimits
from exai.store.rows import loads, message_row

__all__ = ["RestoredRows", "ancestry_depth", "check_depth", "check_fork_point", "restore_rows"]


async def ancestry_depth(
    db: Executor, dialect: Dialect, parent_id: str, child_id: str, max_depth: int
) -> int:
    """Depth a child of ``parent_id`` would have, walking the parent chain.

    Stops counting past ``max_depth``; raises when the chain would lead back to
    ``child_id``.
    """
    seen = {child_id}
    depth = 0
    current: str | None = parent_id
    sql = dialect.sql("SELECT parent_id FROM {p}threads WHERE id = ?")
    while current is not None:
        if current in seen:
            raise ValidationError_(f"conversation {child_id} would be its own ancestor")
        seen.add(current)
        depth += 1
        if depth > max_depth:
            break
        row = await db.fetchrow(sql, current)
        current = None if row is None else row[0]
    return depth


def check_depth(depth: int, source_id: str, limits: StoreLimits, log: Any) -> None:
    """Refuse a fork deeper than ``fork_max_depth``; log one deeper than ``fork_warn_depth``."""
    limit = limits.fork_max_depth
    if depth > limit:
        raise ValidationError_(
            f"forks nest at most {limit} deep and conversation {source_id} is already at "
            f"depth {depth - 1}; fork one nearer its root or start a new conversation",
            details={"depth": depth, "fork_max_depth": limit},
        )
    if depth > limits.fork_warn_depth:
        log.warning("deep_fork", parent_id=source_id, depth=depth, limit=limit)


async def check_fork_point(db: Executor, dialect: Dialect, thread_id: str, at: int) -> None:
    """Refuse a fork point that would split an assistant tool call from its results."""
    rows = await db.fetch(
        dialect.sql("SELECT seq, role, fields FROM {p}messages WHERE thread_id = ?"
                    " AND seq >= ? AND seq <= ? ORDER BY seq"), thread_id, at, at + 1)  # fmt: skip
    by_seq = {row[0]: row for row in rows}
    last, following = by_seq.get(at), by_seq.get(at + 1)
    calls = last is not None and last[1] == "assistant" and (loads(last[2]) or {}).get("tool_calls")
    if calls or (following is not None and following[1] == "tool"):
        raise ValidationError_(
            f"seq {at} is inside a tool call and its results; fork before the assistant "
            "message that made the call or after its last tool result"
        )


@dataclass(frozen=True, slots=True)
class RestoredRows:
    """The rows of an imported thread and the totals its thread row records."""

    rows: list[tuple[Any, ...]]
    chars: int
    turns: int
    last_seq: int
    files: dict[str, int]  # path -> seq of its newest reference


def restore_rows(thread_id: str, messages: Sequence[StoredMessage]) -> RestoredRows:
    """Check an imported thread's numbering and encode its messages."""
    ordered = sorted(messages, key=lambda m: m.seq)
    if [m.seq for m in ordered] != list(range(1, len(ordered) + 1)):
        raise ValidationError_(f"conversation {thread_id}: message seq must run 1, 2, 3...")
    turns = [m.turn for m in ordered]
    if turns and (turns[0] != 1 or any(b not in (a, a + 1) for a, b in pairwise(turns))):
        raise ValidationError_(f"conversation {thread_id}: turns must run 1, 2, 3... in order")
    rows: list[tuple[Any, ...]] = []
    chars = turn_start = 0
    files: dict[str, int] = {}
    for index, message in enumerate(ordered):
        if index == 0 or message.turn != ordered[index - 1].turn:
            turn_start = chars
        size, row = message_row(replace(message, thread_id=thread_id), turn_start)
        rows.append(row)
        chars += size
        files.update(dict.fromkeys(message.files or (), message.seq))
    return RestoredRows(rows, chars, turns[-1] if turns else 0, len(ordered), files)
