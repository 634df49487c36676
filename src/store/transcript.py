"""Conversations as JSONL: exai's own export format, and transcripts other tools write.

An export is one JSON object per line: a ``{"type": "thread", ...}`` line, then
``{"type": "message", ...}`` lines for its messages in order; parents come before
their forks, so an export imports back in one pass.

Other tools write plainer transcripts, which :func:`parse_transcript` accepts:

* one ``{"role", "content", "timestamp"}`` object per line, in order; or
* lines with ``id`` and ``parent_id`` linking each message to the one before it,
  in any order. A line without ``id`` gets one; a line without the
  ``parent_id`` key follows the line above it.

The links must form one unbroken chain: a ``parent_id`` naming no line, two
roots, a message with two children, a cycle, an unknown role or a tool result
without its ``tool_call_id`` is refused with the line number.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from exai.errors import ValidationError_
from exai.store.base import StoredMessage, Thread
from exai.store.rows import ROLES

__all__ = ["ImportedThread", "export_lines", "parse_transcript"]

ImportedThread = tuple[Thread, list[StoredMessage]]

_THREAD_FIELDS = ("id", "owner", "title", "created_at", "updated_at", "parent_id",
                  "fork_point", "depth", "deleted_at", "face", "client", "session_ref",
                  "follows")  # fmt: skip
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})


def export_lines(thread: Thread, messages: Iterable[StoredMessage]) -> Iterator[str]:
    """The JSONL lines of one thread."""
    head = {"type": "thread", **{name: getattr(thread, name) for name in _THREAD_FIELDS}}
    yield json.dumps(head, ensure_ascii=False)
    for message in messages:
        yield json.dumps({"type": "message", **dataclasses.asdict(message)}, ensure_ascii=False)


def _fail(lineno: int, problem: str) -> ValidationError_:
    return ValidationError_(f"line {lineno}: {problem}")


def _objects(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    objects = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _fail(lineno, f"not JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise _fail(lineno, "not a JSON object")
        objects.append((lineno, value))
    if not objects:
        raise ValidationError_("the transcript is empty")
    return objects


def parse_transcript(lines: Iterable[str], *, owner: str, now: float) -> list[ImportedThread]:
    """Threads ready for :meth:`ConversationStore.import_thread`.

    An exai export keeps its ids, owners and times; a foreign transcript becomes
    one new thread owned by ``owner``, last active ``now``.
    """
    objects = _objects(lines)
    if any(obj.get("type") in ("thread", "message") for _, obj in objects):
        return _parse_export(objects)
    return [_parse_foreign(objects, owner, now)]


def _parse_export(objects: list[tuple[int, dict[str, Any]]]) -> list[ImportedThread]:
    threads: dict[str, ImportedThread] = {}
    names = {f.name for f in dataclasses.fields(StoredMessage)}
    for lineno, obj in objects:
        kind = obj.pop("type", None)
        if kind == "thread":
            try:
                thread = Thread(**{k: obj.get(k) for k in _THREAD_FIELDS},
                                expires_at=float(obj["updated_at"]))  # fmt: skip
            except (KeyError, TypeError, ValueError) as exc:
                raise _fail(lineno, f"bad thread record ({exc})") from None
            if thread.id in threads:
                raise _fail(lineno, f"conversation {thread.id} appears twice")
            threads[thread.id] = (thread, [])
        elif kind == "message":
            owner_thread = threads.get(str(obj.get("thread_id")))
            if owner_thread is None:
                raise _fail(lineno, "message before the thread line it belongs to")
            if obj.get("role") not in ROLES:
                raise _fail(lineno, f"role {obj.get('role')!r} is not one of {sorted(ROLES)}")
            try:
                owner_thread[1].append(
                    StoredMessage(**{k: v for k, v in obj.items() if k in names})
                )
            except TypeError as exc:
                raise _fail(lineno, f"bad message record ({exc})") from None
        else:
            raise _fail(lineno, f"unknown record type {kind!r}")
    return list(threads.values())


def _timestamp(lineno: int, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise _fail(lineno, f"timestamp {value!r} is neither ISO 8601 nor epoch seconds")


class _Entry:
    __slots__ = ("id", "lineno", "message", "parent", "timestamp")

    def __init__(self, lineno: int, id: str, parent: str | None, message: dict[str, Any],
                 timestamp: float) -> None:  # fmt: skip
        self.lineno, self.id, self.parent = lineno, id, parent
        self.message, self.timestamp = message, timestamp


def _entries(objects: list[tuple[int, dict[str, Any]]], now: float) -> list[_Entry]:
    entries: list[_Entry] = []
    for lineno, obj in objects:
        nested = obj.get("message")
        body: dict[str, Any] = nested if isinstance(nested, dict) else obj
        role = body.get("role")
        if role not in ROLES:
            raise _fail(lineno, f"role {role!r} is not one of {sorted(ROLES)}")
        content = body.get("content")
        if content is not None and not isinstance(content, str | list):
            raise _fail(lineno, "content must be a string, a list of parts or null")
        if role == "tool" and not isinstance(body.get("tool_call_id"), str):
            raise _fail(lineno, "a tool message needs the tool_call_id it answers")
        message = {k: v for k, v in body.items() if k in _MESSAGE_KEYS}
        entry_id = str(obj["id"]) if obj.get("id") is not None else str(uuid.uuid4())
        if "parent_id" in obj:
            parent = None if obj["parent_id"] is None else str(obj["parent_id"])
        else:
            parent = entries[-1].id if entries else None
        entries.append(_Entry(lineno, entry_id, parent, message,
                              _timestamp(lineno, obj.get("timestamp"), now)))  # fmt: skip
    return entries


def _chain(entries: list[_Entry]) -> list[_Entry]:
    """The entries in conversation order, after checking they form one chain."""
    by_id: dict[str, _Entry] = {}
    for entry in entries:
        if entry.id in by_id:
            raise _fail(entry.lineno, f"id {entry.id!r} is already used on line "
                                      f"{by_id[entry.id].lineno}")  # fmt: skip
        by_id[entry.id] = entry
    children: dict[str | None, list[_Entry]] = {}
    for entry in entries:
        if entry.parent is not None and entry.parent not in by_id:
            raise _fail(entry.lineno, f"parent_id {entry.parent!r} matches no message id "
                                      "in the transcript")  # fmt: skip
        if entry.parent == entry.id:
            raise _fail(entry.lineno, "a message cannot be its own parent")
        children.setdefault(entry.parent, []).append(entry)
    for parent, kids in children.items():
        if parent is not None and len(kids) > 1:
            lines = ", ".join(str(k.lineno) for k in kids)
            raise _fail(kids[1].lineno, f"message {parent!r} has several replies (lines "
                                        f"{lines}); import one branch at a time")  # fmt: skip
    roots = children.get(None, [])
    if len(roots) != 1:
        if not roots:
            raise ValidationError_("the parent_id links form a cycle: no message starts it")
        lines = ", ".join(str(r.lineno) for r in roots)
        raise _fail(roots[1].lineno, f"several messages have no parent (lines {lines}); "
                                     "a transcript must be one conversation")  # fmt: skip
    ordered: list[_Entry] = []
    current: _Entry | None = roots[0]
    while current is not None:
        ordered.append(current)
        following = children.get(current.id)
        current = following[0] if following else None
    if len(ordered) != len(entries):
        reached = {e.id for e in ordered}
        stray = next(e for e in entries if e.id not in reached)
        raise _fail(stray.lineno, "the parent_id links form a cycle this message is part of")
    return ordered


def _check_tool_results(ordered: list[_Entry]) -> None:
    calls: set[str] = set()
    for entry in ordered:
        message = entry.message
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping) and call.get("id") is not None:
                calls.add(str(call["id"]))
        if message["role"] == "tool" and message["tool_call_id"] not in calls:
            raise _fail(entry.lineno, f"tool result {message['tool_call_id']!r} answers no "
                                      "earlier tool call")  # fmt: skip


def _parse_foreign(objects: list[tuple[int, dict[str, Any]]], owner: str, now: float
                   ) -> ImportedThread:  # fmt: skip
    ordered = _chain(_entries(objects, now))
    _check_tool_results(ordered)
    thread_id = str(uuid.uuid4())
    messages: list[StoredMessage] = []
    turn = 1
    turn_has_exchange = False
    for seq, entry in enumerate(ordered, 1):
        message = entry.message
        if message["role"] == "user" and turn_has_exchange:
            turn += 1
            turn_has_exchange = False
        turn_has_exchange = turn_has_exchange or message["role"] in ("user", "assistant")
        content = message.get("content")
        extra = {"name": message["name"]} if isinstance(message.get("name"), str) else {}
        if isinstance(content, list):
            extra["content"] = content
        messages.append(StoredMessage(
            thread_id=thread_id, seq=seq, turn=turn, role=message["role"],
            content=content if isinstance(content, str) else None,
            request_id=f"import-{entry.id}", created_at=entry.timestamp,
            tool_calls=message.get("tool_calls") or None,
            tool_call_id=message.get("tool_call_id"), extra=extra or None,
        ))  # fmt: skip
    first_user = next((m.content for m in messages if m.role == "user" and m.content), None)
    thread = Thread(
        id=thread_id, owner=owner, title=first_user[:80] if first_user else None,
        created_at=messages[0].created_at, updated_at=now, expires_at=now,
    )  # fmt: skip
    return thread, messages
