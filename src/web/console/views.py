"""What the console's pages show, made from the reads' data and the forms. No I/O.

- a thread's stored messages grouped into turns, each with its model, cost,
  time, files and attachments, its text rendered by :mod:`.markdown`;
- times and amounts as people read them;
- the forms turned into tool arguments (``schedule``, ``remember``), with a
  clear message for what is wrong;
- where a sign-in may return to (only a page of the console: no open redirect).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup

from exai.web.console.markdown import render_markdown

__all__ = [
    "FormError",
    "Turn",
    "group_turns",
    "job_arguments",
    "memory_arguments",
    "money",
    "safe_next",
    "when",
]

MAX_FORM_FIELD = 100_000


class FormError(ValueError):
    """A form field is missing or wrong; the message says which and why."""


@dataclass(slots=True)
class Entry:
    role: str
    html: Markup
    tool_calls: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Turn:
    turn: int
    seq: int  # its first message's
    at: float
    last_seq: int = 0
    model: str | None = None
    provider: str | None = None
    cost: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    trace_id: str | None = None
    files: list[str] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)


def money(amount: Any) -> str:
    """A decimal amount as people read it: no trailing zeros past the cents, no exponent."""
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        return str(amount)
    text = format(value.normalize(), "f")
    whole, _, cents = text.partition(".")
    return f"{whole}.{cents.ljust(2, '0')}"


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _parts(content: Any) -> tuple[str, list[str]]:
    """The text of a message's content, and a name for each non-text part."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts, attachments = [], []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            attachments.append("image (inline)" if url.startswith("data:") else f"image {url}")
        else:
            name = part.get("name") or part.get("filename") or part.get("file_id") or ""
            attachments.append(f"{kind or 'part'} {name}".strip())
    return "\n\n".join(texts), attachments


def group_turns(
    messages: list[dict[str, Any]],
    costs: dict[Any, dict[str, str]],
    traces: dict[int, str] | None = None,
) -> list[Turn]:
    """Stored messages (in order) as turns; ``costs`` maps a turn's first seq to
    ``{currency: amount}``, ``traces`` to its call's trace id. A turn cut off at the
    start of the page is left out."""
    turns: list[Turn] = []
    for message in messages:
        number = message["turn"]
        if not turns or turns[-1].turn != number:
            if not turns and message["seq"] != 1 and message["role"] != "user":
                continue  # the tail of a turn older than the page
            spent = costs.get(message["seq"]) or costs.get(str(message["seq"])) or {}
            turns.append(
                Turn(
                    number,
                    message["seq"],
                    message["created_at"],
                    cost=[f"{money(amount)} {cur}" for cur, amount in sorted(spent.items())],
                    trace_id=(traces or {}).get(message["seq"]),
                )
            )
        turn = turns[-1]
        turn.last_seq = message["seq"]
        text, attachments = _parts(message.get("content"))
        turn.attachments += attachments
        turn.files += [f for f in message.get("files") or [] if f not in turn.files]
        if message.get("model"):
            turn.model, turn.provider = message["model"], message.get("provider")
        if message.get("usage"):
            turn.usage = message["usage"]
        calls = [
            str((c.get("function") or {}).get("name") or c.get("type") or "tool")
            for c in message.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        if text or calls:
            turn.entries.append(Entry(message["role"], render_markdown(text), calls))
    return turns


def safe_next(target: str | None, default: str = "/console/threads") -> str:
    """``target`` if it is a page of the console on this site, else ``default``."""
    if not target or "\\" in target or any(ord(c) < 0x20 for c in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith("//"):
        return default
    if parts.path != "/console" and not parts.path.startswith("/console/"):
        return default
    return target


def _field(form: dict[str, str], name: str, *, required: bool = False, limit: int = 2000) -> str:
    value = form.get(name, "").strip()
    if required and not value:
        raise FormError(f"{name.replace('_', ' ')} is required")
    if len(value) > limit:
        raise FormError(f"{name.replace('_', ' ')} is longer than {limit} characters")
    return value


def job_arguments(form: dict[str, str]) -> dict[str, Any]:
    """The ``schedule`` tool's arguments from the new-job form."""
    raw = _field(form, "arguments", limit=MAX_FORM_FIELD) or "{}"
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FormError(
            f"arguments must be a JSON object: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    if not isinstance(arguments, dict):
        raise FormError('arguments must be a JSON object, such as {"prompt": "..."}')
    out: dict[str, Any] = {
        "tool": _field(form, "tool", required=True, limit=128),
        "arguments": arguments,
        "when": _field(form, "when", required=True, limit=200),
        "timezone": _field(form, "timezone", limit=64) or "UTC",
    }
    for name in ("name", "continuation_id", "notify_url"):
        value = _field(form, name)
        if value:
            out[name] = value
    if out.get("notify_url"):
        out["notify_kind"] = _field(form, "notify_kind") or "ntfy"
    return out


def memory_arguments(form: dict[str, str]) -> dict[str, Any]:
    """The ``remember`` tool's arguments from the memory form."""
    tags = [t.strip() for t in _field(form, "tags", limit=1000).split(",") if t.strip()]
    out: dict[str, Any] = {
        "content": _field(form, "content", required=True, limit=MAX_FORM_FIELD),
        "type": _field(form, "type") or "fact",
        "tags": tags,
    }
    project = _field(form, "project")
    if project:
        out["project"] = project
    return out
