"""A thread's stored messages as a transcript the console shows. No I/O.

Messages are grouped into turns (one stored append each: a ``chat`` call, or
one answered request of an agent session), each with its model, tokens, cost,
trace, files and attachments. Within a turn, each message becomes an
:class:`Entry`:

- a person's or an agent's prompt, with the ``<system-reminder>`` blocks
  agents wrap around it set apart (shown collapsed);
- the model's text, rendered as Markdown (:mod:`.markdown`: sanitized, code
  highlighted), its reasoning apart, and each tool call it made with its
  arguments shown as they read best (a JSON object member by member: text as
  text, anything else as highlighted JSON);
- a tool result, tied to the call it answers by ``tool_call_id``: to the most
  recent call with that id not yet answered, since providers reuse ids
  (Kimi numbers them per response), and across turns, since an agent sends a
  call's result with its next request. Each side names the other's anchor.

Everything here is untrusted text: what is not rendered by :mod:`.markdown`
is escaped by the templates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from exai.web.console.markdown import highlight, render_markdown
from exai.web.console.views import money

__all__ = ["MAX_SHOWN", "Entry", "ToolCall", "Turn", "group_turns", "total_cost"]

# A tool result or argument longer than this is cut on the page (the export has it whole).
MAX_SHOWN = 20_000
_REMINDER = re.compile(r"\s*<system-reminder>(.*?)</system-reminder>\s*", re.S)


@dataclass(slots=True)
class Shown:
    """Text as the page shows it, cut at :data:`MAX_SHOWN` characters."""

    html: Markup
    cut: int = 0  # characters left out


@dataclass(slots=True)
class ToolCall:
    call_id: str
    name: str
    anchor: str  # the id of its block on the page
    summary: str  # one line: its first argument, shortened
    members: list[tuple[str, Shown, bool]] = field(default_factory=list)  # key, value, as code
    whole: Shown | None = None  # arguments that are not a JSON object
    result: str | None = None  # the anchor of its result's block, once on the page


@dataclass(slots=True)
class Entry:
    role: str
    html: Markup = field(default_factory=Markup)
    anchor: str = ""
    reasoning: Markup | None = None
    calls: list[ToolCall] = field(default_factory=list)
    output: Shown | None = None  # a tool result's text
    call_id: str | None = None  # a tool result's
    answers: ToolCall | None = None  # the call a tool result answers, when on the page
    reminders: list[Markup] = field(default_factory=list)


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


def _shown(text: str, language: str = "") -> Shown:
    cut = max(0, len(text) - MAX_SHOWN)
    text = text[:MAX_SHOWN] if cut else text
    return Shown(highlight(text, language) if language else Markup.escape(text), cut)


def _one_line(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit and line == text.strip() else line[: limit - 1] + "…"


def _call(raw: dict[str, Any], anchor: str) -> ToolCall:
    function = raw.get("function")
    function = function if isinstance(function, dict) else {}
    name = str(function.get("name") or raw.get("type") or "tool")
    call = ToolCall(str(raw.get("id") or ""), name, anchor, "")
    arguments = function.get("arguments")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
        call.whole = _shown(str(arguments))
    if isinstance(parsed, dict):
        for key, value in parsed.items():
            if isinstance(value, str):
                call.members.append((str(key), _shown(value), False))
            else:
                pretty = json.dumps(value, ensure_ascii=False, indent=2)
                call.members.append((str(key), _shown(pretty, "json"), True))
        if parsed:
            key, value = next(iter(parsed.items()))
            call.summary = f"{key}: {_one_line(value)}"
    elif call.whole is None and parsed is not None:
        call.whole = _shown(json.dumps(parsed, ensure_ascii=False, indent=2), "json")
    return call


def _prompt(text: str) -> tuple[Markup, list[Markup]]:
    """A prompt's text without the reminders an agent wrapped around it, and them."""
    reminders = [render_markdown(r.strip()) for r in _REMINDER.findall(text)]
    rest = _REMINDER.sub("\n\n", text).strip() if reminders else text
    return render_markdown(rest), reminders


def group_turns(
    messages: list[dict[str, Any]],
    costs: dict[Any, dict[str, str]],
    traces: dict[int, str] | None = None,
) -> list[Turn]:
    """Stored messages (in order, whole turns) as turns; ``costs`` maps a turn's first
    seq to ``{currency: amount}``, ``traces`` to its call's trace id."""
    turns: list[Turn] = []
    waiting: dict[str, ToolCall] = {}  # calls not answered yet, by id
    for message in messages:
        seq = message["seq"]
        if not turns or turns[-1].turn != message["turn"]:
            spent = costs.get(seq) or costs.get(str(seq)) or {}
            turns.append(
                Turn(
                    message["turn"],
                    seq,
                    message["created_at"],
                    cost=[f"{money(amount)} {cur}" for cur, amount in sorted(spent.items())],
                    trace_id=(traces or {}).get(seq),
                )
            )
        turn = turns[-1]
        turn.last_seq = seq
        text, attachments = _parts(message.get("content"))
        turn.attachments += attachments
        turn.files += [f for f in message.get("files") or [] if f not in turn.files]
        if message.get("model"):
            turn.model, turn.provider = message["model"], message.get("provider")
        if message.get("usage"):
            turn.usage = message["usage"]
        role = str(message["role"])
        entry = Entry(role, anchor=f"m{seq}")
        if role == "tool":
            entry.call_id = str(message.get("tool_call_id") or "")
            entry.output = _shown(text)
            entry.answers = waiting.pop(entry.call_id, None)
            if entry.answers is not None:
                entry.answers.result = entry.anchor
        elif role == "user":
            entry.html, entry.reminders = _prompt(text)
        elif role == "system":
            # Shown as written, not as Markdown: an agent's system prompt is long and full
            # of headings that would read as the page's own.
            entry.output = _shown(text)
        else:
            entry.html = render_markdown(text)
        if message.get("reasoning"):
            entry.reasoning = render_markdown(str(message["reasoning"]))
        for i, raw in enumerate(message.get("tool_calls") or []):
            if isinstance(raw, dict):
                call = _call(raw, f"m{seq}-call{i}")
                entry.calls.append(call)
                if call.call_id:
                    waiting[call.call_id] = call
        if text or entry.calls or entry.reasoning or role == "tool":
            turn.entries.append(entry)
    return turns


def total_cost(costs: dict[str, str]) -> list[str]:
    """A ``{currency: amount}`` as people read it, one string per currency."""
    return [f"{money(amount)} {currency}" for currency, amount in sorted(costs.items())]
