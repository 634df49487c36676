"""The emulated model's calls to the caller's tools: which, with what ids, and in what text.

Part of the provider emulator (a TEST FIXTURE). The emulated model calls a
caller's tool when a test scripts it (``Scripted.tool_calls``, made whenever the
request offers any tool) or when the request forces a call (``tool_choice``
``"required"``, which calls the first tool offered, or a named function) with
empty arguments; with ``tool_choice: "none"`` it calls nothing. Ids are made
the way each vendor makes them, and are the same for the same request:

- Moonshot numbers calls through the conversation, ``functions.<name>:<n>`` (n
  counts the calls already in the messages), so two conversations that make the
  same first call get the same id, as with Moonshot;
- Z.ai's are opaque, ``call_<hex>``, here a digest of the request and the call's
  position.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from exai.emulators.vendor_wire import Vendor

__all__ = ["LAST_TOOL_RESULT", "fill_template", "last_tool_result", "planned_calls"]

LAST_TOOL_RESULT = "{last_tool_result}"


def _offered(body: dict[str, Any]) -> list[str]:
    return [
        t["function"]["name"]
        for t in body.get("tools") or []
        if isinstance(t, dict)
        and t.get("type") == "function"
        and isinstance(t.get("function"), dict)
        and "name" in t["function"]
    ]


def last_tool_result(messages: list[dict[str, Any]]) -> str:
    """The content of the request's last tool message ("" if none)."""
    for message in reversed(messages):
        if message.get("role") == "tool":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def fill_template(text: str, messages: list[dict[str, Any]]) -> str:
    """``text`` with ``{last_tool_result}`` replaced (nothing else is a placeholder)."""
    if LAST_TOOL_RESULT not in text:
        return text
    return text.replace(LAST_TOOL_RESULT, last_tool_result(messages))


def planned_calls(
    vendor: Vendor, body: dict[str, Any], scripted: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """The tool calls the emulated model makes in reply to ``body``, OpenAI shape."""
    choice = body.get("tool_choice")
    offered = _offered(body)
    if choice == "none" or not body.get("tools"):
        return []
    wanted: list[tuple[str, Any]]
    if scripted:  # as scripted, even a tool not offered: what a misbehaving model does
        wanted = [(c["name"], c.get("arguments", {})) for c in scripted]
    elif not offered:
        return []
    elif isinstance(choice, dict):
        wanted = [(choice.get("function", {}).get("name", offered[0]), {})]
    elif choice == "required":
        wanted = [(offered[0], {})]
    else:
        return []
    messages = body.get("messages") or []
    earlier = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
    calls = []
    for index, (name, arguments) in enumerate(wanted):
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append(
            {
                "id": _call_id(vendor, messages, name, earlier, index),
                "type": "function",
                "function": {"name": name, "arguments": text},
            }
        )
    return calls


def _call_id(
    vendor: Vendor, messages: list[dict[str, Any]], name: str, earlier: int, index: int
) -> str:
    if vendor == "kimi":
        return f"functions.{name}:{earlier + index}"
    digest = hashlib.sha256(
        json.dumps([messages, name, index], sort_keys=True, default=str).encode()
    ).hexdigest()
    return f"call_{digest[:24]}"
