"""A scripted stand-in for the Anthropic Messages API, for driving the real Claude Code.

A TEST FIXTURE, not a model. Claude Code reads ``ANTHROPIC_BASE_URL`` and posts
to ``/v1/messages`` (streamed as SSE); this server answers from a
:class:`~tests.clients.scripted.Script`:

- Claude Code defers MCP tools behind its own ``ToolSearch`` tool, so before the
  first call of an exai tool the stand-in makes the model search for it (by
  the call's ``search`` keywords, or ``select:<name>``), as a real model must;
- it then calls the scripted exai tools in order, each with arguments that
  may depend on the tool results already in the conversation;
- every ``tool_result`` block the client sends back is recorded as an
  :class:`~tests.clients.scripted.Observation`: the exact text the model saw.

Requests that are not the scripted conversation (Claude Code also asks for
titles and summaries) get a short plain answer. Every request body is kept in
:attr:`AnthropicStandIn.requests` for the tests.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.clients.scripted import Observation, Script
from tests.clients.serving import ThreadedApp

__all__ = ["MARKER", "AnthropicStandIn"]

# Put in the prompt of a scripted conversation; side requests do not carry tools with it.
MARKER = "[exai-test]"
_SEARCH = "ToolSearch"
_PREFIX = "mcp__exai__"


class AnthropicStandIn(ThreadedApp):
    def __init__(self) -> None:
        super().__init__(self._app(), "anthropic-standin")
        self.script = Script(calls=[])
        self.requests: list[dict[str, Any]] = []
        self.searches: list[Observation] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _app(self) -> Starlette:
        async def messages(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                self.requests.append(body)
            content, stop = self._reply(body)
            message = {
                "id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant",
                "model": body.get("model", "stand-in"), "content": content,
                "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }  # fmt: skip
            if body.get("stream"):
                return StreamingResponse(_sse(message), media_type="text/event-stream")
            return JSONResponse(message)

        async def count_tokens(request: Request) -> Response:
            return JSONResponse({"input_tokens": 10})

        async def other(request: Request) -> Response:
            return JSONResponse({}, status_code=404)

        return Starlette(routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route("/{path:path}", other, methods=["GET", "POST", "HEAD"]),
        ])  # fmt: skip

    # --- the scripted model -------------------------------------------------

    def _reply(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        tools = {t.get("name"): t for t in body.get("tools") or []}
        messages = body.get("messages") or []
        if _SEARCH not in tools or MARKER not in json.dumps(messages[:1]):
            return [{"type": "text", "text": "ok"}], "end_turn"
        results = _tool_results(messages)
        seen: list[str] = []
        loaded: set[str] = {n for n, t in tools.items() if not t.get("defer_loading")}
        for name, text, is_error in results:
            if name == _SEARCH:
                observation = Observation(name, text, is_error)
                if observation not in self.searches:
                    self.searches.append(observation)
                loaded.update(n for n in tools if n in text)
                loaded.update(_PREFIX + t for t in _exai_names(text))
            elif name.startswith(_PREFIX):
                self.script.observe(Observation(name, text, is_error))
                seen.append(text)
        call = self.script.next_call(seen)
        if call is None:
            return [{"type": "text", "text": self.script.final}], "end_turn"
        name = _PREFIX + call.tool
        if name not in loaded:
            query = call.search or f"select:{name}"
            already = sum(1 for r in results if r[0] == _SEARCH)
            if already > len(seen) + 1:  # a model gives up on a tool it cannot find
                return [{"type": "text", "text": f"{name} not found"}], "end_turn"
            if call.search and already:  # keywords did not find it: fall back to select
                query = f"select:{name}"
            return [self._tool_use(_SEARCH, {"query": query, "max_results": 5})], "tool_use"
        return [self._tool_use(name, call.resolve(seen))], "tool_use"

    def _tool_use(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"toolu_{next(self._ids):04d}", "name": name,
                "input": arguments}  # fmt: skip


def _exai_names(text: str) -> list[str]:
    return [part.split('"', 1)[0] for part in text.split(_PREFIX)[1:]]


def _tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """``(tool name, text shown to the model, is_error)`` for each tool result, in order."""
    names: dict[str, str] = {}
    out: list[tuple[str, str, bool]] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                out.append((names.get(block.get("tool_use_id", ""), "?"),
                            _result_text(block.get("content")),
                            bool(block.get("is_error"))))  # fmt: skip
    return out


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_reference":
            parts.append(json.dumps(block))
    return "\n".join(parts)


def _sse(message: dict[str, Any]) -> Iterator[bytes]:
    def event(kind: str, data: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    yield event("message_start", {"message": {**message, "content": [], "stop_reason": None}})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            yield event(
                "content_block_start", {"index": index, "content_block": {**block, "input": {}}}
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
    yield event("message_delta", {"delta": {"stop_reason": message["stop_reason"],
                                            "stop_sequence": None},
                                  "usage": {"output_tokens": 5}})  # fmt: skip
    yield event("message_stop", {})
