"""Anthropic content blocks as OpenAI chat messages, and the ids and signatures between them.

Claude Code's history arrives as Anthropic messages: content blocks of text,
images, ``tool_use`` (assistant), ``tool_result`` (user), ``thinking``. The model
under exai takes OpenAI chat messages, so each Anthropic message becomes one or
more of those, in order:

- a user message's ``tool_result`` blocks become ``role: "tool"`` messages (OpenAI
  wants them right after the assistant message that made the calls), and its
  other blocks one user message after them; an image a tool returned goes into
  that user message too, since a tool message carries text only (noted);
- an assistant message's text, ``tool_use`` blocks and ``thinking`` become one
  assistant message with ``tool_calls`` and ``reasoning_content``;
- a ``system`` message in the conversation (Claude Code's mid-conversation system
  turns) stays a system message; a message's own ``output_config`` (an effort
  level for that turn) is checked and kept for the request to weigh against its own
  (:mod:`exai.web.anthropic_request`).

Ids: a vendor's tool-call ids (Moonshot's ``functions.Read:0``) may hold
characters Anthropic's ``tool_use`` ids do not, so such an id goes out as
``toolu_x<base64url of it>`` and comes back as the vendor's own
(:func:`outgoing_id`, :func:`incoming_id`), and the model sees the ids it made.

Reasoning: a thinking model's reasoning is sent as a ``thinking`` block whose
``signature`` carries it sealed (:mod:`exai.web.reasoning_seal`), so it comes
back with the history even when the client asked for the thinking text to be
omitted, and a tool round's reasoning reaches the model again (Moonshot refuses a
thinking tool round without it). Only what the seal opens is sent as the
model's reasoning: a block whose signature does not open (altered, another
principal's, another deployment's, too old, or none) is left out with a note,
whatever its ``thinking`` text says, since that text is the client's to write.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from exai.web.model_call import Note, RequestRefused, check_known, want_dict, want_str
from exai.web.model_shared import effort_level, open_carrier
from exai.web.reasoning_seal import Carriers

__all__ = [
    "EFFORTS",
    "Converted",
    "convert_messages",
    "incoming_id",
    "outgoing_id",
    "system_text",
]

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_ID_PREFIX = "toolu_x"
_TEXT_KEYS = ("type", "text", "cache_control", "citations")
_IMAGE_KEYS = ("type", "source", "cache_control")
_TOOL_USE_KEYS = ("type", "id", "name", "input", "cache_control")
_RESULT_KEYS = ("type", "tool_use_id", "content", "is_error", "cache_control")
_THINKING_KEYS = ("type", "thinking", "signature")


def outgoing_id(vendor_id: str) -> str:
    """A vendor's tool-call id as a ``tool_use`` id (``[A-Za-z0-9_-]+``)."""
    if _SAFE_ID.match(vendor_id) and not vendor_id.startswith(_ID_PREFIX):
        return vendor_id
    return _ID_PREFIX + base64.urlsafe_b64encode(vendor_id.encode()).decode().rstrip("=")


def incoming_id(tool_use_id: str) -> str:
    """The vendor's id behind a ``tool_use`` id :func:`outgoing_id` made (others as they are)."""
    if not tool_use_id.startswith(_ID_PREFIX):
        return tool_use_id
    encoded = tool_use_id[len(_ID_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return tool_use_id


def system_text(system: Any) -> str:
    """``system``, a string or text blocks, as one string."""
    if isinstance(system, str):
        return system
    parts = []
    for index, block in enumerate(system if isinstance(system, list) else [None]):
        where = f"system[{index}]"
        block = want_dict(block, where)
        check_known(block, _TEXT_KEYS, f"{where}.")
        if block.get("type") != "text":
            raise RequestRefused("the system prompt holds text blocks only", param=where)
        parts.append(want_str(block.get("text"), f"{where}.text"))
    return "\n\n".join(parts)


@dataclass
class Converted:
    """The chat messages, the deferred tools a ``tool_reference`` loaded, and the notes."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    loaded_tools: set[str] = field(default_factory=set)
    notes: list[Note] = field(default_factory=list)
    # (where, level) of each turn that asked for an effort level, in order
    efforts: list[tuple[str, str]] = field(default_factory=list)


def convert_messages(messages: Any, carriers: Carriers) -> Converted:
    """Anthropic ``messages`` as OpenAI chat messages (the system prompt apart)."""
    if not isinstance(messages, list) or not messages:
        raise RequestRefused("messages must be a non-empty array", param="messages")
    out = Converted()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        message = want_dict(message, where)
        check_known(message, ("role", "content", "output_config"), f"{where}.")
        if message.get("output_config") is not None:
            out.efforts.append(_turn_effort(message["output_config"], f"{where}.output_config"))
        role = message.get("role")
        content = message.get("content")
        if role not in ("user", "assistant", "system"):
            raise RequestRefused(
                'a message\'s role is "user", "assistant" or "system"', param=f"{where}.role"
            )
        if isinstance(content, str):
            out.messages.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise RequestRefused(
                "content is a string or an array of blocks", param=f"{where}.content"
            )
        if role == "assistant":
            out.messages.append(_assistant(content, where, out, carriers))
        else:
            out.messages += _user(content, where, role, out)
    return out


def _user(blocks: list[Any], where: str, role: str, out: Converted) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        block = want_dict(block, at)
        kind = block.get("type")
        if kind == "text":
            check_known(block, _TEXT_KEYS, f"{at}.")
            parts.append({"type": "text", "text": want_str(block.get("text"), f"{at}.text")})
        elif kind == "image":
            check_known(block, _IMAGE_KEYS, f"{at}.")
            parts.append(_image(block, at))
        elif kind == "tool_result" and role == "user":
            check_known(block, _RESULT_KEYS, f"{at}.")
            text, images = _result_content(block.get("content"), at, out)
            if block.get("is_error"):
                text = f"(the tool reported an error)\n{text}"
            tools.append(
                {
                    "role": "tool",
                    "content": text,
                    "tool_call_id": incoming_id(
                        want_str(block.get("tool_use_id"), f"{at}.tool_use_id")
                    ),
                }
            )
            if images:
                parts += images
                out.notes.append(
                    Note(
                        at,
                        "a tool message carries text only: the images of "
                        "this tool result follow it in a user message",
                    )
                )
        else:
            raise RequestRefused(
                f"exai does not serve {kind!r} blocks in a {role} message",
                param=at,
                code="unsupported_parameter",
            )
    if role == "system":
        if any(p["type"] != "text" for p in parts):
            raise RequestRefused("a system message holds text only", param=where)
        return [{"role": "system", "content": "\n\n".join(p["text"] for p in parts)}]
    if not parts:
        return tools
    if all(p["type"] == "text" for p in parts) and len(parts) == 1:
        return [*tools, {"role": "user", "content": parts[0]["text"]}]
    return [*tools, {"role": "user", "content": parts}]


def _assistant(blocks: list[Any], where: str, out: Converted, carriers: Carriers) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        block = want_dict(block, at)
        kind = block.get("type")
        if kind == "text":
            check_known(block, _TEXT_KEYS, f"{at}.")
            texts.append(want_str(block.get("text"), f"{at}.text"))
        elif kind == "tool_use":
            check_known(block, _TOOL_USE_KEYS, f"{at}.")
            arguments = json.dumps(
                want_dict(block.get("input", {}), f"{at}.input"), ensure_ascii=False
            )
            calls.append(
                {
                    "id": incoming_id(want_str(block.get("id"), f"{at}.id")),
                    "type": "function",
                    "function": {
                        "name": want_str(block.get("name"), f"{at}.name"),
                        "arguments": arguments,
                    },
                }
            )
        elif kind == "thinking":
            check_known(block, _THINKING_KEYS, f"{at}.")
            shown = bool(block.get("thinking"))
            opened = open_carrier(carriers, block.get("signature"), shown=shown,
                                  missing="it has no signature exai made")  # fmt: skip
            if opened.text:
                reasoning.append(opened.text)
            elif opened.why:
                out.notes.append(Note(at, f"this thinking block was not sent as the model's "
                                          f"reasoning: {opened.why}"))  # fmt: skip
        elif kind == "redacted_thinking":
            out.notes.append(
                Note(
                    at,
                    "redacted thinking is another vendor's sealed reasoning, "
                    "which Kimi and GLM cannot read; it was left out",
                )
            )
        else:
            raise RequestRefused(
                f"exai does not serve {kind!r} blocks in an assistant message",
                param=at,
                code="unsupported_parameter",
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "\n\n".join(reasoning)
    return message


EFFORTS = ("low", "medium", "high", "xhigh", "max")


def _turn_effort(config: Any, where: str) -> tuple[str, str]:
    """Check a message's own ``output_config`` (Claude Code's per-turn control, which
    carries only an effort level); where its effort is, and the level."""
    config = want_dict(config, where)
    check_known(config, ("effort",), f"{where}.")
    return f"{where}.effort", effort_level(config.get("effort"), f"{where}.effort", EFFORTS)


def _image(block: dict[str, Any], at: str) -> dict[str, Any]:
    source = want_dict(block.get("source"), f"{at}.source")
    if source.get("type") == "base64":
        media = want_str(source.get("media_type"), f"{at}.source.media_type")
        data = want_str(source.get("data"), f"{at}.source.data")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if source.get("type") == "url":
        return {
            "type": "image_url",
            "image_url": {"url": want_str(source.get("url"), f"{at}.source.url")},
        }
    raise RequestRefused(
        "an image's source is base64 data or a url",
        param=f"{at}.source",
        code="unsupported_parameter",
    )


def _result_content(content: Any, at: str, out: Converted) -> tuple[str, list[dict[str, Any]]]:
    """A tool result's text, and its images apart."""
    if content is None or isinstance(content, str):
        return content or "", []
    if not isinstance(content, list):
        raise RequestRefused("a tool result's content is a string or blocks", param=f"{at}.content")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for k, block in enumerate(content):
        inner = f"{at}.content[{k}]"
        block = want_dict(block, inner)
        kind = block.get("type")
        if kind == "text":
            check_known(block, _TEXT_KEYS, f"{inner}.")
            texts.append(want_str(block.get("text"), f"{inner}.text"))
        elif kind == "image":
            check_known(block, _IMAGE_KEYS, f"{inner}.")
            images.append(_image(block, inner))
        elif kind == "tool_reference":
            check_known(block, ("type", "tool_name", "cache_control"), f"{inner}.")
            name = want_str(block.get("tool_name"), f"{inner}.tool_name")
            out.loaded_tools.add(name)
            texts.append(f"Tool loaded: {name}")
        else:
            raise RequestRefused(
                f"exai does not serve {kind!r} blocks in a tool result",
                param=inner,
                code="unsupported_parameter",
            )
    return "\n".join(texts), images
