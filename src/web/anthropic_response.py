"""exai results as Anthropic messages: the whole body, and the stream of events.

A whole answer is one ``message``: a ``thinking`` block when the model reasoned
(its text left out when the request asked ``display: "omitted"``; its
``signature`` carries the reasoning back, see :mod:`exai.web.anthropic_blocks`),
the text, and a ``tool_use`` block for each call of the caller's tools, with
``stop_reason`` ``end_turn``, ``max_tokens``, ``tool_use`` or ``refusal``.

Streamed, the same blocks arrive as Anthropic's event sequence:
``message_start``, then for each block ``content_block_start``,
``content_block_delta`` (``thinking_delta``, ``signature_delta``, ``text_delta``,
``input_json_delta``) and ``content_block_stop``, then ``message_delta`` (stop
reason and usage) and ``message_stop``; ``ping`` while the model is quiet. The
``model`` of a message is the name the request asked for; the model that
answered, the cost and what exai adapted are in ``exai`` (on the body, or on
``message_delta``).

Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from exai.protocol import CallToolResult, ErrorInfo
from exai.web.anthropic_blocks import outgoing_id
from exai.web.anthropic_errors import error_body
from exai.web.anthropic_request import MessagesCall
from exai.web.model_call import Note
from exai.web.model_stream import sse_event

__all__ = ["MessageStream", "message_body", "stop_reason", "usage_of"]

_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "sensitive": "refusal",
}


def stop_reason(result: CallToolResult) -> str:
    reason = (result.metadata.model_extra or {}).get("finish_reason") or "stop"
    return _STOP.get(str(reason), "end_turn")


def _sealed(call: MessagesCall, reasoning: str) -> str:
    """The thinking block's ``signature``: the reasoning, sealed for the caller."""
    assert call.carriers is not None, "the Messages face seals what it hands out"
    return call.carriers.seal(reasoning)


def usage_of(result: CallToolResult) -> dict[str, int]:
    usage = result.metadata.usage or {}
    prompt = int(usage.get("prompt_tokens", 0))
    cached = int(usage.get("cached_prompt_tokens", 0))
    return {
        "input_tokens": prompt - cached,
        "output_tokens": int(usage.get("completion_tokens", 0)),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def _tool_calls(result: CallToolResult) -> list[dict[str, Any]]:
    calls = (result.metadata.model_extra or {}).get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict)]


def _input(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as ``tool_use.input``: the object the model wrote. Arguments
    that are not a JSON object are passed under ``_arguments`` so the client's schema check
    refuses them and the model sees why."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"_arguments": arguments}
    return value if isinstance(value, dict) else {"_arguments": arguments}


def _exai(call: MessagesCall, result: CallToolResult, extra_notes: list[Note]) -> dict[str, Any]:
    meta = result.metadata
    fields: dict[str, Any] = {
        "request_id": result.request_id,
        "model": meta.model,
        "provider": meta.provider,
        "cost": meta.cost,
    }
    more = meta.model_extra or {}
    for key in ("fallback_from", "trace_id"):
        if more.get(key):
            fields[key] = more[key]
    notes = [n.as_dict() for n in (*call.notes, *extra_notes)]
    notes += [n for n in more.get("notes") or [] if isinstance(n, dict)]
    if notes:
        fields["notes"] = notes
    return fields


def message_body(
    call: MessagesCall, result: CallToolResult, text: str, *, message_id: str
) -> dict[str, Any]:
    """The ``message`` for a successful result whose answer is ``text``."""
    extra = result.metadata.model_extra or {}
    content: list[dict[str, Any]] = []
    reasoning = extra.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        content.append(
            {
                "type": "thinking",
                "thinking": reasoning if call.show_thinking else "",
                "signature": _sealed(call, reasoning),
            }
        )
    if text:
        content.append({"type": "text", "text": text})
    for tool_call in _tool_calls(result):
        function = tool_call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": outgoing_id(str(tool_call.get("id", ""))),
                "name": function.get("name"),
                "input": _input(function.get("arguments")),
            }
        )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": content,
        "stop_reason": stop_reason(result),
        "stop_sequence": None,
        "usage": usage_of(result),
        "exai": _exai(call, result, []),
    }


class MessageStream:
    """The events of one streamed message, in order (a
    :class:`~exai.web.model_stream.StreamEncoder`).

    Blocks follow each other, never overlap: a thinking, text or tool-use piece
    that differs from the open block closes it and opens its own. A model that
    streams the arguments of two tool calls interleaved (none does) would have the
    late pieces of the first one missing; that is reported in the notes.
    """

    def __init__(self, call: MessagesCall, *, message_id: str) -> None:
        self.call = call
        self.message_id = message_id
        self.index = -1
        self.open: tuple[str, int | None] | None = None  # ("text" | "thinking" | "tool_use", call)
        self.reasoning: list[str] = []
        self.streamed: dict[int, list[str]] = {}  # arguments sent, by tool call index
        self.late: set[int] = set()

    def opening(self) -> bytes:
        message = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.call.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        }
        return sse_event("message_start", {"type": "message_start", "message": message})

    def _start(self, kind: str, block: dict[str, Any], tool: int | None = None) -> bytes:
        out = self._close()
        self.index += 1
        self.open = (kind, tool)
        return out + sse_event(
            "content_block_start",
            {"type": "content_block_start", "index": self.index, "content_block": block},
        )

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse_event(
            "content_block_delta",
            {"type": "content_block_delta", "index": self.index, "delta": delta},
        )

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        out = b""
        if self.open[0] == "thinking":
            signature = _sealed(self.call, "".join(self.reasoning))
            out = self._delta({"type": "signature_delta", "signature": signature})
        self.open = None
        return out + sse_event(
            "content_block_stop", {"type": "content_block_stop", "index": self.index}
        )

    def delta(self, delta: Any) -> bytes:
        kind = getattr(delta, "kind", None)
        if kind == "reasoning" and delta.text:
            out = b""
            if self.open is None or self.open[0] != "thinking":
                self.reasoning = []
                out = self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self.reasoning.append(delta.text)
            if self.call.show_thinking:
                out += self._delta({"type": "thinking_delta", "thinking": delta.text})
            return out
        if kind == "text" and delta.text:
            out = b""
            if self.open is None or self.open[0] != "text":
                out = self._start("text", {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": delta.text})
        if kind == "tool_call":
            call = delta.tool_call or {}
            name = (call.get("function") or {}).get("name")
            self.streamed[delta.index] = []
            return self._start(
                "tool_use",
                {
                    "type": "tool_use",
                    "id": outgoing_id(str(call.get("id", ""))),
                    "name": name,
                    "input": {},
                },
                delta.index,
            )
        if kind == "tool_arguments" and delta.text:
            if self.open != ("tool_use", delta.index):
                self.late.add(delta.index)
                return b""
            self.streamed[delta.index].append(delta.text)
            return self._delta({"type": "input_json_delta", "partial_json": delta.text})
        return b""

    def closing(self, result: CallToolResult) -> bytes:
        out = self._close()
        notes = []
        if self.late:
            notes.append(
                Note(
                    "tools",
                    "the model streamed the arguments of several tool "
                    "calls at once; the late pieces of calls "
                    f"{sorted(self.late)} are missing from their input",
                )
            )
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(result), "stop_sequence": None},
            "usage": usage_of(result),
            "exai": _exai(self.call, result, notes),
        }
        return (
            out
            + sse_event("message_delta", message_delta)
            + sse_event("message_stop", {"type": "message_stop"})
        )

    def failure(self, info: ErrorInfo) -> bytes:
        return self._close() + sse_event("error", error_body(info))

    def ping(self) -> bytes:
        return sse_event("ping", {"type": "ping"})
