"""Which stored reasoning goes back to a vendor with the history, and which must not.

A thinking model's reasoning (``reasoning_content``) is stored with the assistant
message that produced it. Sending it back is a per-vendor rule:

- Moonshot keeps ``reasoning_content`` in context for multi-step tool use, and a
  thinking Kimi model rejects a request whose assistant tool-call message lacks it
  ("thinking is enabled but reasoning_content is missing in assistant tool call
  message"), so with a thinking Kimi model it goes back on every tool-call
  message, and a tool-call round stored without it (made by a model that did not
  think) is left out of the request rather than failing it.
- Z.ai interleaves thinking with tool calls and asks that the reasoning "be
  explicitly preserved and returned together with the tool results"; it does not
  reject a request without it. Reasoning of earlier plain answers is kept only in
  Z.ai's "preserved thinking" mode (``clear_thinking: false``), which exai does not
  use, so it is not sent.
- A model with Preserved Thinking (Moonshot's K2.7 Code: "you must keep the
  reasoning_content of every historical assistant message as-is") gets every
  assistant message's reasoning back, and an empty ``reasoning_content`` where a
  message had none (an answer from a model that did not think), as Moonshot's own
  client sends it.
- A model that does not think, or an endpoint whose rules are unknown, gets no
  reasoning at all, and a vendor that does not define Moonshot's built-in tools
  (``builtin_function``, e.g. ``$web_search``) does not get those rounds either:
  they carry a search id, and the answer that used the search follows them.

Leaving rounds out is for exai's own stored threads, whose rounds exai made and
may skip. A caller's own messages (a stateless request, ``client=True``) always
reach the model whole: only the reasoning fields follow the vendor's rule, and a
round the vendor would refuse without its reasoning is settled before the request
is built (see :mod:`exai.providers.tool_reasoning`).

The rule is a pure function of the messages and the target, so assembling the
same thread for the same model twice gives the same bytes (a stable prompt prefix).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ReplayRule", "lacking_reasoning", "reasoning_of", "replay_messages"]

_REASONING_KEYS = ("reasoning_content", "reasoning")


@dataclass(frozen=True, slots=True)
class ReplayRule:
    """What a vendor accepts of stored reasoning and tool rounds on one call."""

    tool_reasoning: bool = False  # send reasoning back with assistant tool-call messages
    requires_tool_reasoning: bool = False  # a tool-call message without it is rejected
    builtin_tools: bool = False  # the vendor defines Moonshot's ``builtin_function`` tools
    # Every assistant message carries its reasoning, as it was, and the field is there
    # even when it was empty (Moonshot's Preserved Thinking, as its own client sends it).
    all_reasoning: bool = False


def reasoning_of(message: dict[str, Any]) -> str:
    """A message's reasoning (``reasoning_content``, or ``reasoning``), "" if none."""
    for key in _REASONING_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _is_builtin(call: Any) -> bool:
    return isinstance(call, dict) and call.get("type") == "builtin_function"


def replay_messages(
    messages: Sequence[dict[str, Any]], rule: ReplayRule, *, client: bool = False
) -> list[dict[str, Any]]:
    """``messages`` as ``rule``'s vendor accepts them; the input is not modified.
    With ``client``, no message is left out."""
    out: list[dict[str, Any]] = []
    dropped_calls: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "tool" and message.get("tool_call_id") in dropped_calls:
            continue
        if role != "assistant":
            out.append(message)
            continue
        calls = message.get("tool_calls") or []
        reasoning = reasoning_of(message)
        leave_out = (
            not client
            and bool(calls)
            and (
                (not rule.builtin_tools and all(_is_builtin(c) for c in calls))
                or (rule.requires_tool_reasoning and not reasoning)
            )
        )
        if leave_out:
            dropped_calls.update(str(c.get("id")) for c in calls if isinstance(c, dict))
            continue
        keep = rule.all_reasoning or (bool(calls) and rule.tool_reasoning and bool(reasoning))
        if keep and message.get("reasoning_content") == reasoning and "reasoning" not in message:
            out.append(message)
            continue
        cleaned = {k: v for k, v in message.items() if k not in _REASONING_KEYS}
        if keep:
            cleaned["reasoning_content"] = reasoning
        out.append(cleaned if len(cleaned) != len(message) or keep else message)
    return out


def lacking_reasoning(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of assistant tool-call messages that carry no reasoning."""
    return [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant" and m.get("tool_calls") and not reasoning_of(m)
    ]
