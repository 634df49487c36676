"""The emulated model: deterministic replies that reveal what it was sent.

Part of the provider emulator (a test fixture). The default reply is
``emulated reply #<n> to: <last user message> (saw <k> messages)`` where ``n``
counts the user turns and ``k`` all messages, so a test of conversation
history can read off what the model saw. The rest mimics vendor behaviour:

- Kimi's ``$web_search``: while the request offers the built-in tool and no
  tool result follows the last user message, the reply is a tool call.
- Calls to the caller's own tools when scripted or forced by ``tool_choice``
  (:mod:`exai.emulators.tool_replies`); scripted text may quote the request's
  last tool result.
- ``stop`` ends the reply before the first stop sequence in it, and
  ``response_format: {"type": "json_object"}`` makes the default reply a JSON
  object, ``{"reply": "<the reply>"}``.
- GLM's ``web_search`` tool: the reply carries search results.
- Reasoning whenever the model thinks (:func:`exai.emulators.models.thinks`).
- The output cap cuts the reply (one token per word) with
  ``finish_reason=length``: ``max_completion_tokens`` on the Moonshot path
  (Moonshot deprecates ``max_tokens``, which it refuses for its models [K-5];
  a generic OpenAI-compatible model there may still send ``max_tokens``), and
  ``max_tokens`` on Z.ai's. A continuation, either Moonshot's trailing
  ``partial`` assistant message or an assistant message followed by a user
  message asking to continue, gets the rest of the same reply, so continued
  replies join up exactly; a ``partial`` continuation carries no new reasoning
  [K-10].
- Z.ai's abnormal ends [G-5] (docs.z.ai/api-reference/api-code: in a stream
  "the reason for the exception will be provided in the finish_reason"): a
  scripted ``finish_reason`` of ``"sensitive"`` empties the reply's content and
  ``"network_error"`` keeps its first half (a scripted ``text`` is taken as
  what was sent before the cut, as is); script them with
  ``{"finish_reason": "network_error"}`` or the marker
  ``[emulate:finish_reason=sensitive]``. A prompt over the configured
  ``max_prompt_tokens`` gets :func:`overflow_reply`, a 200 with empty content and
  ``finish_reason: "model_context_window_exceeded"``.
"""

from __future__ import annotations

import json
from typing import Any

from exai.emulators.models import thinks
from exai.emulators.tool_replies import fill_template, planned_calls
from exai.emulators.vendor_rules import offers_kimi_search
from exai.emulators.vendor_wire import Reply, Vendor, split_tokens

__all__ = ["ABNORMAL_ENDS", "compose_reply", "message_text", "overflow_reply", "prompt_tokens"]

# Z.ai finish reasons for a reply that ended abnormally, and what they keep of the text.
ABNORMAL_ENDS = frozenset({"sensitive", "network_error"})
CONTEXT_EXCEEDED = "model_context_window_exceeded"


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(split_tokens(message_text(m))) for m in messages)


def _last_user(messages: list[dict[str, Any]]) -> tuple[int, str]:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index, message_text(messages[index])
    return -1, ""


def _split_continuation(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """``(conversation, text already given)`` when the request continues a cut reply."""
    if messages and messages[-1].get("role") == "assistant" and messages[-1].get("partial"):
        return messages[:-1], message_text(messages[-1])
    if (
        len(messages) >= 2
        and messages[-1].get("role") == "user"
        and "continue" in message_text(messages[-1]).lower()
        and messages[-2].get("role") == "assistant"
        and not messages[-2].get("tool_calls")
    ):
        return messages[:-2], message_text(messages[-2])
    return messages, ""


def _full_reply(conversation: list[dict[str, Any]], body: dict[str, Any], text: str | None) -> str:
    """The whole reply to ``conversation``: the scripted ``text``, else the emulated
    one (a JSON object under JSON mode), cut before the first stop sequence."""
    full = text
    if full is None:
        turn = sum(1 for m in conversation if m.get("role") == "user")
        _, asked = _last_user(conversation)
        full = f"emulated reply #{turn} to: {asked} (saw {len(conversation)} messages)"
        if (body.get("response_format") or {}).get("type") == "json_object":
            full = json.dumps({"reply": full})
    return _before_stop(full, body.get("stop"))


def _offers_glm_search(tools: list[dict[str, Any]]) -> bool:
    return any(
        t.get("type") == "web_search" and t.get("web_search", {}).get("enable") in (True, "True")
        for t in tools
    )


def _before_stop(text: str, stop: Any) -> str:
    """``text`` up to the first stop sequence in it, as the vendors cut a reply."""
    stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str)]
    cuts = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


def compose_reply(
    vendor: Vendor,
    body: dict[str, Any],
    seq: int,
    *,
    text: str | None = None,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> Reply:
    """The reply to one chat-completions request; ``text``, ``reasoning``,
    ``finish_reason`` and calls to the caller's tools (``[{"name", "arguments"}]``)
    replace the emulated ones when a test scripted them."""
    messages: list[dict[str, Any]] = list(body.get("messages") or [])
    tools: list[dict[str, Any]] = list(body.get("tools") or [])
    tokens_in = prompt_tokens(messages)
    user_index, last_user = _last_user(messages)
    if text is not None:
        text = fill_template(text, messages)

    calls = planned_calls(vendor, body, tool_calls)
    if calls:
        names = ", ".join(c["function"]["name"] for c in calls)
        planned = f"emulated reasoning: call {names} for {last_user}"
        return Reply(pieces=split_tokens(text or ""), tool_calls=calls, prompt_tokens=tokens_in,
                     reasoning=reasoning if reasoning is not None
                     else (planned if thinks(vendor, body) else ""),
                     finish_reason=finish_reason or "tool_calls")  # fmt: skip

    searched = any(m.get("role") == "tool" for m in messages[user_index + 1 :])
    if vendor == "kimi" and offers_kimi_search(tools) and not searched and text is None:
        arguments = {"search_result": {"search_id": f"emu-search-{seq}"},
                     "usage": {"total_tokens": 42}}  # fmt: skip
        call = {
            "id": f"web_search-emu-{seq}",
            "type": "builtin_function",
            "function": {"name": "$web_search", "arguments": json.dumps(arguments)},
        }
        planned = f"emulated reasoning: search the web for {last_user}"
        return Reply(tool_calls=[call], finish_reason="tool_calls", prompt_tokens=tokens_in,
                     reasoning=(reasoning or planned) if thinks(vendor, body) else "")  # fmt: skip

    partial = bool(messages and messages[-1].get("role") == "assistant"
                   and messages[-1].get("partial"))  # fmt: skip
    conversation, given = _split_continuation(messages)
    full = _full_reply(conversation, body, text)
    cut = full.startswith(given) and len(full) > len(given)
    if given and not messages[-1].get("partial") and not cut:
        # A user message asking to "continue" a reply that was not cut is a message
        # like any other: the emulator continues only what it cut.
        conversation, given = messages, ""
        full = _full_reply(conversation, body, text)
    _, asked = _last_user(conversation)
    rest = full[len(given) :] if given and full.startswith(given) else full
    pieces = split_tokens(rest)
    finish = "stop"
    limit = body.get("max_tokens")
    if vendor == "kimi" and "max_completion_tokens" in body:
        limit = body["max_completion_tokens"]
    if isinstance(limit, int) and 0 < limit < len(pieces):
        pieces, finish = pieces[:limit], "length"
    if vendor == "glm" and finish_reason in ABNORMAL_ENDS and text is None:
        pieces = pieces[: len(pieces) // 2] if finish_reason == "network_error" else []

    if reasoning is None:
        thinking = thinks(vendor, body) and not given and not partial
        reasoning = f"emulated reasoning about: {asked}" if thinking else ""
    search = []
    if vendor == "glm" and _offers_glm_search(tools):
        search = [{
            "title": "Emulated search result",
            "link": f"https://example.com/emulated/{seq}",
            "content": f"A page about: {last_user}",
            "media": "emulator",
            "icon": "",
            "refer": "ref_1",
            "publish_date": "2025-01-01",
        }]  # fmt: skip
    return Reply(
        pieces=pieces,
        reasoning=reasoning,
        finish_reason=finish_reason or finish,
        prompt_tokens=tokens_in,
        web_search=search,
    )


def overflow_reply(body: dict[str, Any]) -> Reply:
    """Z.ai's answer to a prompt longer than the model's context [G-5]."""
    return Reply(finish_reason=CONTEXT_EXCEEDED,
                 prompt_tokens=prompt_tokens(list(body.get("messages") or [])))  # fmt: skip
