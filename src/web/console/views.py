"""What the console's pages show, made from the reads' data and the forms. No I/O.

- times (exact, and relative: "3 minutes ago") and amounts as people read them;
- an agent session's client and the model face it came through;
- the forms turned into tool arguments (``schedule``, ``remember``), with a
  clear message for what is wrong;
- where a sign-in may return to (only a page of the console: no open redirect).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "FACE_PATHS",
    "FormError",
    "ago",
    "client_family",
    "iso",
    "job_arguments",
    "memory_arguments",
    "money",
    "safe_next",
    "session_label",
    "when",
]

MAX_FORM_FIELD = 100_000


class FormError(ValueError):
    """A form field is missing or wrong; the message says which and why."""


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


def iso(ts: float | None) -> str:
    """The machine-readable time of a ``<time datetime>``."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


_UNITS = (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400),
          ("day", 86400), ("hour", 3600), ("minute", 60))  # fmt: skip


def ago(ts: float | None, now: float) -> str:
    """``ts`` relative to ``now``, in its largest whole unit: "3 minutes ago",
    "in 2 days", "just now" (within a minute)."""
    if ts is None:
        return "-"
    delta = now - ts
    for unit, seconds in _UNITS:
        count = int(abs(delta) // seconds)
        if count:
            span = f"{count} {unit}{'' if count == 1 else 's'}"
            return f"{span} ago" if delta > 0 else f"in {span}"
    return "just now"


# The model face an agent session came through, as the agent's settings name it.
FACE_PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
}


def client_family(client: str | None) -> str:
    """A client's name without its version ("Claude Code 2.1.3": "Claude Code"), which
    lists its sessions across the client's upgrades."""
    return _VERSIONED.sub("", client or "")


_VERSIONED = re.compile(r" \d[A-Za-z0-9._+-]*$")


def session_label(thread: dict[str, Any]) -> str:
    """What marks an agent session: its client and face, "Claude Code 2.1.3 ·
    /v1/messages"; empty for a chat thread."""
    face = thread.get("face")
    if not face:
        return ""
    client = thread.get("client") or "an agent"
    return f"{client} · {FACE_PATHS.get(face, face)}"


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
