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

from exai.protocol import CallToolResult, ErrorInfo, ModelAnswer, StreamEvent
from exai.web.anthropic_blocks import outgoing_id
from exai.web.anthropic_errors import error_body
from exai.web.anthropic_request import MessagesCall
from exai.web.event_stream import sse_event
from exai.web.model_call import Note
from exai.web.model_shared import answer_notes, exai_envelope, seal_reasoning

__all__ = ["MessageStream", "message_body", "stop_reason", "usage_of"]

_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "sensitive": "refusal",
}


def stop_reason(answer: ModelAnswer) -> str:
    return _STOP.get(answer.finish_reason or "stop", "end_turn")


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


def _exai(
    call: MessagesCall, result: CallToolResult, answer: ModelAnswer, *more: Note
) -> dict[str, Any]:
    return exai_envelope(result, answer, answer_notes(call, answer, *more))


def message_body(
    call: MessagesCall, result: CallToolResult, text: str, *, message_id: str
) -> dict[str, Any]:
    """The ``message`` for a successful result whose answer is ``text``."""
    answer = ModelAnswer.of(result.metadata)
    content: list[dict[str, Any]] = []
    reasoning = answer.reasoning
    if reasoning:
        content.append(
            {
                "type": "thinking",
                "thinking": reasoning if call.show_thinking else "",
                "signature": seal_reasoning(call, reasoning),
            }
        )
    if text:
        content.append({"type": "text", "text": text})
    for tool_call in answer.tool_calls:
        function = tool_call["function"]
        content.append(
            {
                "type": "tool_use",
                "id": outgoing_id(tool_call["id"]),
                "name": function["name"],
                "input": _input(function["arguments"]),
            }
        )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": content,
        "stop_reason": stop_reason(answer),
        "stop_sequence": None,
        "usage": usage_of(result),
        "exai": _exai(call, result, answer),
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
            signature = seal_reasoning(self.call, "".join(self.reasoning))
            out = self._delta({"type": "signature_delta", "signature": signature})
        self.open = None
        return out + sse_event(
            "content_block_stop", {"type": "content_block_stop", "index": self.index}
        )

    def delta(self, event: StreamEvent) -> bytes:
        kind = event.kind
        if kind == "reasoning" and event.text:
            out = b""
            if self.open is None or self.open[0] != "thinking":
                self.reasoning = []
                out = self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self.reasoning.append(event.text)
            if self.call.show_thinking:
                out += self._delta({"type": "thinking_delta", "thinking": event.text})
            return out
        if kind == "text" and event.text:
            out = b""
            if self.open is None or self.open[0] != "text":
                out = self._start("text", {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": event.text})
        if kind == "tool_call" and event.tool_call is not None and event.index is not None:
            call = event.tool_call
            self.streamed[event.index] = []
            return self._start(
                "tool_use",
                {
                    "type": "tool_use",
                    "id": outgoing_id(call["id"]),
                    "name": call["function"]["name"],
                    "input": {},
                },
                event.index,
            )
        if kind == "tool_arguments" and event.text and event.index is not None:
            if self.open != ("tool_use", event.index):
                self.late.add(event.index)
                return b""
            self.streamed[event.index].append(event.text)
            return self._delta({"type": "input_json_delta", "partial_json": event.text})
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
        answer = ModelAnswer.of(result.metadata)
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(answer), "stop_sequence": None},
            "usage": usage_of(result),
            "exai": _exai(self.call, result, answer, *notes),
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
