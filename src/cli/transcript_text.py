"""Stored threads as text for a terminal: a listing row, a header, a transcript. No I/O.

Everything printed here was chosen by someone else: a client's name comes from its
User-Agent, a title from a user's message, a tool result from whatever the tool
read. :func:`printable` writes every control character except newline and tab as
``\\xNN`` (and the format characters that reorder or hide text as ``\\uNNNN``), so
no stored message can move the cursor, retitle the window or clear the screen of
the operator reading it.

A transcript groups messages by turn, each turn headed by when it was stored, the
model that answered, its tokens and its cost. A tool call shows its id, name and
arguments; a tool result names the call it answers (by id, anywhere earlier in the
thread). Reasoning and system prompts (an agent's is often thousands of lines) are
shown as their size unless asked for.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from exai.logs import escape_unprintable
from exai.providers.pricing import from_nanos
from exai.store import StoredMessage, Thread

__all__ = [
    "FACES",
    "LIST_HEADING",
    "face_name",
    "header_lines",
    "list_row",
    "printable",
    "transcript_lines",
    "when",
]

# The model faces an agent session comes through, and the path each serves.
FACES: Final = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
                "responses": "/v1/responses"}  # fmt: skip

_INDENT = "    "


def printable(text: str) -> str:
    """``text`` with its line breaks and tabs, every other control character (and what
    reorders or hides text) escaped, as the console log writes it."""
    return escape_unprintable(text.replace("\r\n", "\n"), keep="\n\t")


def _one_line(text: str | None, width: int | None = None) -> str:
    flat = printable(" ".join((text or "").split()))
    return flat if width is None or len(flat) <= width else flat[: width - 1] + "…"


def face_name(text: str) -> str:
    """An ``argparse`` type: a face by name (``anthropic``) or path (``/v1/messages``)."""
    key = text.strip().lower().strip("/").removeprefix("v1/")
    for name, path in FACES.items():
        if key in (name, path.removeprefix("/v1/")):
            return name
    shown = ", ".join(f"{name} ({path})" for name, path in FACES.items())
    raise argparse.ArgumentTypeError(f"must be one of {shown}, not {text[:40]!r}")


def when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


LIST_HEADING: Final = (f"{'ID':<36}  {'OWNER':<16} {'TURNS':>6}  {'UPDATED':<20}  "
                       f"{'FACE':<9}  {'CLIENT':<20}  TITLE")  # fmt: skip


def list_row(thread: Thread) -> str:
    """One thread on one line under :data:`LIST_HEADING`; a chat thread's face is ``-``."""
    state = " deleted" if thread.deleted_at else ""
    face, client = _one_line(thread.face or "-", 9), _one_line(thread.client or "-", 20)
    return (f"{thread.id}  {_one_line(thread.owner):<16} {thread.turns:>6}  "
            f"{when(thread.updated_at)}{state}  {face:<9}  {client:<20}  "
            f"{_one_line(thread.title, 50)}")  # fmt: skip


def _money(nanos_by_currency: Mapping[str, int]) -> str:
    """Amounts as people read them: at least the cents, no trailing zeros past them."""
    shown = []
    for currency, nanos in sorted(nanos_by_currency.items()):
        text = format(Decimal(from_nanos(nanos)).normalize(), "f")
        whole, _, cents = text.partition(".")
        shown.append(f"{whole}.{cents.ljust(2, '0')} {_one_line(currency)}")
    return ", ".join(shown)


def header_lines(thread: Thread, costs: Mapping[int, Mapping[str, int]]) -> Iterator[str]:
    """Who and what the thread is: owner, title, the agent session it keeps, its lineage,
    its times and what its turns cost in all."""
    yield f"thread   {thread.id}"
    yield f"owner    {_one_line(thread.owner)}"
    yield f"title    {_one_line(thread.title) or '-'}"
    if thread.face is not None:
        path = FACES.get(thread.face)
        yield f"face     {_one_line(thread.face)}" + (f" ({path})" if path else "")
        yield f"client   {_one_line(thread.client) or '-'}"
        yield f"session  {_one_line(thread.session_ref) or '-'} (the client's own id)"
    yield f"created  {when(thread.created_at)}"
    yield f"updated  {when(thread.updated_at)}"
    yield f"expires  {when(thread.expires_at)}"
    yield f"turns    {thread.turns}"
    total: dict[str, int] = {}
    for by_currency in costs.values():
        for currency, nanos in by_currency.items():
            total[currency] = total.get(currency, 0) + nanos
    if total:
        yield f"cost     {_money(total)} ({len(costs)} turn(s) priced)"
    if thread.parent_id:
        yield f"fork of  {thread.parent_id} at seq {thread.fork_point} (depth {thread.depth})"
    if thread.follows:
        yield f"follows  {thread.follows} (the client rewrote its history)"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tokens(usage: Mapping[str, Any]) -> str:
    prompt, cached = _count(usage.get("prompt_tokens")), _count(usage.get("cached_prompt_tokens"))
    out, reasoning = _count(usage.get("completion_tokens")), _count(usage.get("reasoning_tokens"))
    text = f"{prompt} in" + (f" ({cached} cached)" if cached else "")
    text += f", {out} out" + (f" ({reasoning} reasoning)" if reasoning else "")
    return text + " tokens"


def _turn_heading(number: int, messages: list[StoredMessage], cost: Mapping[str, int]) -> str:
    parts = [f"turn {number}", when(messages[0].created_at)]
    answered = next((m for m in reversed(messages) if m.model), None)
    if answered is not None and answered.model:
        model = _one_line(answered.model)
        parts.append(model + (f" ({_one_line(answered.provider)})" if answered.provider else ""))
    usage = next((m.usage for m in reversed(messages) if m.usage), None)
    if usage:
        parts.append(_tokens(usage))
    if cost:
        parts.append(_money(cost))
    return "=== " + " · ".join(parts)


def _indented(text: str, indent: str = _INDENT) -> Iterator[str]:
    for line in printable(text).split("\n"):
        yield indent + line if line else ""


def _content(content: Any) -> Iterator[str]:
    """A message's content: its text, and a bracketed line for each other part."""
    if content is None or content == "":
        return
    if isinstance(content, str):
        yield from _indented(content)
        return
    for part in content if isinstance(content, list) else [content]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            yield from _indented(str(part.get("text", "")))
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            shown = "inline" if url.startswith("data:") else _one_line(url, 120)
            yield f"{_INDENT}[image {shown}]"
        else:
            yield f"{_INDENT}[{_one_line(json.dumps(part, ensure_ascii=False), 200)}]"


def _call_name(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else call.get("name")
    return str(name or call.get("type") or "tool")


def _arguments(call: Mapping[str, Any]) -> Iterator[str]:
    """A call's arguments, one per line; a multi-line string value as a block below its
    name. Arguments that are not a JSON object are shown as they came."""
    function = call.get("function")
    raw = function.get("arguments") if isinstance(function, dict) else call.get("arguments")
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
    indent = _INDENT * 2
    if not isinstance(value, dict):
        if raw not in (None, ""):
            text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
            yield from _indented(text, indent)
        return
    for key, item in value.items():
        if isinstance(item, str) and "\n" in item:
            yield f"{indent}{_one_line(str(key))}: |"
            yield from _indented(item, indent + "  ")
        else:
            shown = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            yield from _indented(f"{key}: {shown}", indent)


def _message_lines(message: StoredMessage, calls: dict[str, str], *, reasoning: bool,
                   system: bool) -> Iterator[str]:  # fmt: skip
    content = message.provider_message().get("content")
    label = f"[{message.seq}] {_one_line(message.role)}"
    if message.role == "tool":
        call_id = message.tool_call_id or ""
        name = calls.get(call_id)
        label = f"[{message.seq}] tool result for {_one_line(call_id) or '?'} " + (
            f"({_one_line(name)})" if name is not None else "(answers no call above)")  # fmt: skip
    elif message.role == "assistant" and message.model:
        label += f" ({_one_line(message.model)})"
    if message.role == "system" and not system and content:
        size = len(content) if isinstance(content, str) else len(json.dumps(content))
        yield f"{label}: {size} characters (--system shows them)"
        return
    yield label
    if message.reasoning:
        if reasoning:
            yield f"{_INDENT}[reasoning]"
            yield from _indented(message.reasoning, _INDENT + "| ")
        else:
            yield f"{_INDENT}[reasoning: {len(message.reasoning)} characters; --reasoning shows it]"
    yield from _content(content)
    for call in message.tool_calls or ():
        if not isinstance(call, dict):
            continue
        call_id, name = str(call.get("id") or "?"), _call_name(call)
        calls[call_id] = name
        yield f"{_INDENT}-> tool call {_one_line(call_id)}: {_one_line(name)}"
        yield from _arguments(call)


def transcript_lines(
    messages: Iterable[StoredMessage],
    costs: Mapping[int, Mapping[str, int]],
    *,
    reasoning: bool = False,
    system: bool = False,
) -> Iterator[str]:
    """The messages turn by turn; ``costs`` maps a turn's first seq to its nanos by currency."""
    calls: dict[str, str] = {}
    for number, grouped in itertools.groupby(messages, key=lambda m: m.turn):
        turn = list(grouped)
        yield ""
        yield _turn_heading(number, turn, costs.get(turn[0].seq) or {})
        for message in turn:
            yield from _message_lines(message, calls, reasoning=reasoning, system=system)
