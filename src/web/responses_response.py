"""exai results as OpenAI Responses API objects: the whole response, and its events.

A response's ``output`` holds, in order, a ``reasoning`` item when the model
reasoned (its text in ``summary`` when the request asked for a summary, and in
``encrypted_content`` when it included ``reasoning.encrypted_content``), a
``message`` item with the text, and a ``function_call`` item for each call of the
caller's tools (``call_id`` the model's id; Codex's namespaced tools with
``namespace`` and ``name`` apart). ``status`` is ``completed``, or
``incomplete`` with ``incomplete_details.reason: "max_output_tokens"`` when the
model was cut.

Streamed: ``response.created``, ``response.in_progress``, then for each item
``response.output_item.added``, its deltas (``response.reasoning_summary_text.delta``,
``response.output_text.delta``, ``response.function_call_arguments.delta``) and
``response.output_item.done``, then ``response.completed`` (or
``response.incomplete``), each with its ``sequence_number``. A call that fails
after the stream started ends it with ``response.failed``. Function-call items
stay open until the end, so arguments the model streams for several calls at
once each reach their own item.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any

from exai.protocol import CallToolResult, ErrorInfo, ModelAnswer, StreamEvent, ToolCall
from exai.web.event_stream import PING, sse_event
from exai.web.model_shared import answer_notes, exai_envelope, seal_reasoning
from exai.web.openai_errors import error_body
from exai.web.responses_request import ResponsesCall

__all__ = ["ResponseStream", "response_body"]


# Finish reasons that leave a response incomplete, and the reason the API names.
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _usage(result: CallToolResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    usage = result.metadata.usage or {}
    prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(usage.get("cached_prompt_tokens", 0))},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))},
        "total_tokens": prompt + completion,
    }


def _item_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _envelope(
    call: ResponsesCall,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    result: CallToolResult | None,
    answer: ModelAnswer | None = None,
) -> dict[str, Any]:
    """The response object around ``output``; ``answer`` is ``result``'s, when known."""
    echo = call.echo
    body: dict[str, Any] = {
        "id": call.response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "model": call.model,
        "output": output,
        "parallel_tool_calls": echo.get("parallel_tool_calls") is not False,
        "previous_response_id": call.previous_response_id,
        "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
        "store": call.store,
        "temperature": echo.get("temperature"),
        "text": echo.get("text") or {"format": {"type": "text"}},
        "tool_choice": echo.get("tool_choice") or "auto",
        "tools": echo.get("tools") or [],
        "top_p": echo.get("top_p"),
        "truncation": "disabled",
        "usage": _usage(result),
        "metadata": {},
    }
    if result is not None:
        answer = answer or ModelAnswer.of(result.metadata)
        body["exai"] = exai_envelope(result, answer, answer_notes(call, answer))
        reason = answer.finish_reason
        if reason in _INCOMPLETE:
            body["status"] = "incomplete"
            body["incomplete_details"] = {"reason": _INCOMPLETE[reason]}
    return body


def _reasoning_item(call: ResponsesCall, reasoning: str, item_id: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
    if call.summary:
        item["summary"] = [{"type": "summary_text", "text": reasoning}]
    if call.encrypted:
        item["encrypted_content"] = seal_reasoning(call, reasoning)
    return item


def _message_item(text: str, item_id: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content if status == "completed" else [],
    }


def _call_item(
    call: ResponsesCall,
    tool_call: ToolCall,
    item_id: str,
    arguments: str | None = None,
    status: str = "completed",
) -> dict[str, Any]:
    function = tool_call["function"]
    namespace, name = call.names.split(function["name"])
    item = {
        "type": "function_call",
        "id": item_id,
        "call_id": tool_call["id"],
        "name": name,
        "arguments": function["arguments"] if arguments is None else arguments,
        "status": status,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def response_body(
    call: ResponsesCall, result: CallToolResult, text: str, created: int
) -> dict[str, Any]:
    """The whole ``response`` object for a successful result whose answer is ``text``."""
    output: list[dict[str, Any]] = []
    answer = ModelAnswer.of(result.metadata)
    if answer.reasoning:
        output.append(_reasoning_item(call, answer.reasoning, _item_id("rs")))
    if text:
        output.append(_message_item(text, _item_id("msg")))
    output += [_call_item(call, c, _item_id("fc")) for c in answer.tool_calls]
    return _envelope(call, created, "completed", output, result, answer)


class ResponseStream:
    """The events of one streamed response, in order (a
    :class:`~exai.web.model_stream.StreamEncoder`)."""

    def __init__(self, call: ResponsesCall, *, created: int) -> None:
        self.call = call
        self.created = created
        self.sequence = itertools.count()
        self.output: list[dict[str, Any]] = []  # finished items, for response.completed
        self.open: tuple[str, int, str] | None = None  # (kind, output_index, item_id)
        self.text: list[str] = []
        self.calls: dict[int, tuple[int, str, ToolCall, list[str]]] = {}

    def _event(self, kind: str, **data: Any) -> bytes:
        return sse_event(kind, {"type": kind, "sequence_number": next(self.sequence), **data})

    def opening(self) -> bytes:
        started = _envelope(self.call, self.created, "in_progress", [], None)
        return self._event("response.created", response=started) + self._event(
            "response.in_progress", response=started
        )

    def _added(self, item: dict[str, Any]) -> tuple[bytes, int]:
        index = len(self.output) + len(self.calls) + (1 if self.open else 0)
        return self._event("response.output_item.added", output_index=index, item=item), index

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        kind, index, item_id = self.open
        self.open = None
        text = "".join(self.text)
        at = {"item_id": item_id, "output_index": index}
        if kind == "reasoning":
            item = _reasoning_item(self.call, text, item_id)
            out = b""
            if self.call.summary:
                part = {"type": "summary_text", "text": text}
                out = self._event(
                    "response.reasoning_summary_text.done", **at, summary_index=0, text=text
                ) + self._event(
                    "response.reasoning_summary_part.done", **at, summary_index=0, part=part
                )
        else:
            item = _message_item(text, item_id)
            part = item["content"][0]
            out = self._event(
                "response.output_text.done", **at, content_index=0, text=text, logprobs=[]
            ) + self._event("response.content_part.done", **at, content_index=0, part=part)
        self.output.append(item)
        return out + self._event("response.output_item.done", output_index=index, item=item)

    def _start(self, kind: str) -> bytes:
        out = self._close()
        item_id = _item_id("rs" if kind == "reasoning" else "msg")
        self.text = []
        if kind == "reasoning":
            added, index = self._added({"type": "reasoning", "id": item_id, "summary": []})
            self.open = (kind, index, item_id)
            if self.call.summary:
                added += self._event(
                    "response.reasoning_summary_part.added",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                )
            return out + added
        added, index = self._added(_message_item("", item_id, "in_progress"))
        self.open = (kind, index, item_id)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return (
            out
            + added
            + self._event(
                "response.content_part.added",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=part,
            )
        )

    def delta(self, event: StreamEvent) -> bytes:
        kind = event.kind
        if kind in ("reasoning", "text") and event.text:
            out = b"" if self.open and self.open[0] == kind else self._start(kind)
            self.text.append(event.text)
            assert self.open is not None
            at = {"item_id": self.open[2], "output_index": self.open[1]}
            if kind == "text":
                return out + self._event(
                    "response.output_text.delta",
                    **at,
                    content_index=0,
                    delta=event.text,
                    logprobs=[],
                )
            if self.call.summary:
                return out + self._event(
                    "response.reasoning_summary_text.delta", **at, summary_index=0, delta=event.text
                )
            return out
        if kind == "tool_call" and event.tool_call is not None and event.index is not None:
            out = self._close()
            item_id = _item_id("fc")
            tool_call = event.tool_call
            added, index = self._added(_call_item(self.call, tool_call, item_id, "", "in_progress"))
            self.calls[event.index] = (index, item_id, tool_call, [])
            return out + added
        if kind == "tool_arguments" and event.text and event.index in self.calls:
            index, item_id, _, pieces = self.calls[event.index]
            pieces.append(event.text)
            return self._event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=event.text,
            )
        return b""

    def closing(self, result: CallToolResult) -> bytes:
        out = self._close()
        answer = ModelAnswer.of(result.metadata)
        final = {c["id"]: c for c in answer.tool_calls}
        for index, item_id, tool_call, pieces in self.calls.values():
            whole = final.get(tool_call["id"], tool_call)
            arguments = whole["function"]["arguments"] or "".join(pieces)
            item = _call_item(self.call, whole, item_id, arguments)
            out += self._event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                arguments=arguments,
            )
            out += self._event("response.output_item.done", output_index=index, item=item)
            self.output.insert(index, item)
        body = _envelope(self.call, self.created, "completed", self.output, result, answer)
        kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
        return out + self._event(kind, response=body)

    def failure(self, info: ErrorInfo) -> bytes:
        body = _envelope(self.call, self.created, "failed", self.output, None)
        error = error_body(info)["error"]
        body["error"] = {"code": error.get("code") or error["type"], "message": info.message}
        return self._close() + self._event("response.failed", response=body)

    def ping(self) -> bytes:
        return PING
