"""A scripted stand-in for the OpenAI Responses API, for driving the real Codex CLI.

A TEST FIXTURE, not a model. Codex, given a model provider with
``wire_api = "responses"``, posts to ``{base_url}/responses`` and reads the
answer as SSE (``response.created``, ``response.output_item.added`` /
``.done``, ``response.output_text.delta``, ``response.completed``). This
server answers from a :class:`~tests.clients.scripted.Script`:

- Codex offers an MCP server's tools as a ``namespace`` tool named
  ``mcp__<server>`` whose functions keep their own names, and the model calls
  one with a ``function_call`` item carrying both ``namespace`` and ``name``;
- for catalogue models Codex defers MCP tools behind its client-side
  ``tool_search`` tool, so before the first call of a tool the model cannot
  see yet, the stand-in searches for it (by the call's ``search`` keywords,
  else its name), as a real model must, and Codex answers with a
  ``tool_search_output`` that loads the matches;
- every ``function_call_output`` Codex sends back for an exai tool is recorded
  as an :class:`~tests.clients.scripted.Observation`: the exact text the model
  read.

Codex 0.169.0 puts no error flag in a ``function_call_output``: its ``output``
is the MCP result's ``structuredContent`` as JSON when there is one, else its
``content`` as ``input_text`` items, after a ``Wall time: ...`` header. So a
model can tell a failure only from that text, and ``is_error`` is recorded as
true when the JSON it read says so (``"isError": true`` or a non-null
``"error"``).

Requests that are not the scripted conversation get a short plain answer.
Every request body is kept in :attr:`ResponsesStandIn.requests` for the tests.
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

__all__ = ["MARKER", "NAMESPACE", "ResponsesStandIn", "model_text", "reads_as_error"]

# Put in the prompt of a scripted conversation; other requests do not carry it.
MARKER = "[exai-test]"
# The namespace Codex gives the tools of the MCP server configured as ``exai``.
NAMESPACE = "mcp__exai"
_SEARCH = "tool_search"
_WALL_TIME = "Wall time:"


class ResponsesStandIn(ThreadedApp):
    def __init__(self) -> None:
        super().__init__(self._app(), "responses-standin")
        self.script = Script(calls=[])
        self.requests: list[dict[str, Any]] = []
        # What Codex's tool_search handed the model, as the text of the tools it loaded.
        self.searches: list[Observation] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _app(self) -> Starlette:
        async def responses(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                self.requests.append(body)
            response = self._response(self._reply(body), body.get("model", "stand-in"))
            if body.get("stream", True):
                return StreamingResponse(_sse(response), media_type="text/event-stream")
            return JSONResponse(response)

        async def other(request: Request) -> Response:
            return JSONResponse({"error": {"message": "not served"}}, status_code=404)

        return Starlette(routes=[
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/{path:path}", other, methods=["GET", "POST", "HEAD"]),
        ])  # fmt: skip

    # --- the scripted model -------------------------------------------------

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        if MARKER not in _user_text(items):
            return self._message("ok")
        loaded = _offered(body.get("tools") or [])
        searches = 0  # since the last exai result: the searches for the call to make now
        seen: list[str] = []
        for kind, name, text, is_error in _results(items):
            if kind == _SEARCH:
                searches += 1
                self._searched(Observation(_SEARCH, text, is_error))
            elif name.startswith(NAMESPACE + "__"):
                self.script.observe(Observation(name, text, is_error))
                seen.append(text)
                searches = 0
        for item in items:  # tools Codex added during the conversation, e.g. by tool_search
            if item.get("type") in ("additional_tools", "tool_search_output"):
                loaded.update(_offered(item.get("tools") or []))
        call = self.script.next_call(seen)
        if call is None:
            return self._message(self.script.final)
        qualified = f"{NAMESPACE}__{call.tool}"
        if qualified not in loaded:
            # A model searches by what it wants, then by the name, then gives up.
            queries = [q for q in (call.search, call.tool) if q]
            if _SEARCH not in loaded or searches >= len(queries):
                return self._message(f"{qualified} not found")
            return self._tool_search(queries[searches])
        return self._function_call(call.tool, Script.arguments_json(call.resolve(seen)))

    def _searched(self, observation: Observation) -> None:
        with self._lock:
            if observation not in self.searches:
                self.searches.append(observation)

    def _message(self, text: str) -> dict[str, Any]:
        return {"type": "message", "id": f"msg_{next(self._ids)}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip

    def _function_call(self, name: str, arguments: str) -> dict[str, Any]:
        n = next(self._ids)
        return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n:04d}",
                "namespace": NAMESPACE, "name": name, "arguments": arguments,
                "status": "completed"}  # fmt: skip

    def _tool_search(self, query: str) -> dict[str, Any]:
        n = next(self._ids)
        return {"type": "tool_search_call", "id": f"ts_{n}", "call_id": f"search_{n:04d}",
                "execution": "client", "arguments": {"query": query, "limit": 8},
                "status": "completed"}  # fmt: skip

    def _response(self, item: dict[str, Any], model: str) -> dict[str, Any]:
        return {"id": f"resp_{next(self._ids)}", "object": "response", "model": model,
                "status": "completed", "output": [item],
                "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 15}}  # fmt: skip


def model_text(output: Any) -> str:
    """A ``function_call_output``'s ``output`` as the model reads it: a string or text items."""
    if isinstance(output, str):
        return output
    parts = [part.get("text", "") for part in output or [] if isinstance(part, dict)]
    return "\n".join(part for part in parts if part)


def reads_as_error(text: str) -> bool:
    """Whether the model can tell from ``text`` that the tool failed; Codex adds no flag."""
    payload = text
    if text.startswith(_WALL_TIME):
        payload = text.partition("Output:\n")[2] or text.partition("Output:")[2]
    try:
        data = json.loads(payload)
    except ValueError:
        return False
    return isinstance(data, dict) and (data.get("isError") is True or bool(data.get("error")))


def _user_text(items: list[dict[str, Any]]) -> str:
    texts = [part.get("text", "") for item in items if item.get("role") == "user"
             for part in item.get("content") or [] if isinstance(part, dict)]  # fmt: skip
    return "\n".join(texts)


def _offered(tools: list[dict[str, Any]]) -> set[str]:
    """Names the model can call: top-level tools, and ``namespace__name`` for namespaced ones."""
    names: set[str] = set()
    for tool in tools:
        if tool.get("type") == "namespace":
            names.update(f"{tool['name']}__{t.get('name')}" for t in tool.get("tools") or [])
        elif tool.get("type") == _SEARCH:
            names.add(_SEARCH)
        elif tool.get("name"):
            names.add(tool["name"])
    return names


def _results(items: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    """``(kind, tool name, text shown to the model, is_error)`` for each tool result, in order."""
    calls: dict[str, str] = {}
    out: list[tuple[str, str, str, bool]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            name = item.get("name", "?")
            calls[item.get("call_id", "")] = (
                f"{item['namespace']}__{name}" if item.get("namespace") else name
            )
        elif kind == "function_call_output":
            text = model_text(item.get("output"))
            out.append(("function", calls.get(item.get("call_id", ""), "?"), text,
                        reads_as_error(text)))  # fmt: skip
        elif kind == "tool_search_output":
            out.append((_SEARCH, _SEARCH, json.dumps(item.get("tools") or []), False))
    return out


def _sse(response: dict[str, Any]) -> Iterator[bytes]:
    sequence = itertools.count()

    def event(kind: str, data: dict[str, Any]) -> bytes:
        payload = {"type": kind, "sequence_number": next(sequence), **data}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", {"response": started})
    yield event("response.in_progress", {"response": started})
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            yield event("response.output_item.added",
                        {"output_index": index, "item": {**item, "status": "in_progress",
                                                         "content": []}})  # fmt: skip
            part = item["content"][0]
            yield event("response.content_part.added",
                        {**at, "content_index": 0, "part": {**part, "text": ""}})  # fmt: skip
            yield event("response.output_text.delta",
                        {**at, "content_index": 0, "delta": part["text"]})  # fmt: skip
            yield event("response.output_text.done",
                        {**at, "content_index": 0, "text": part["text"]})  # fmt: skip
            yield event("response.content_part.done", {**at, "content_index": 0, "part": part})
        elif item["type"] == "function_call":
            yield event("response.output_item.added",
                        {"output_index": index, "item": {**item, "status": "in_progress",
                                                         "arguments": ""}})  # fmt: skip
            yield event("response.function_call_arguments.delta",
                        {**at, "delta": item["arguments"]})  # fmt: skip
            yield event("response.function_call_arguments.done",
                        {**at, "arguments": item["arguments"]})  # fmt: skip
        else:
            added = {**item, "status": "in_progress"}
            yield event("response.output_item.added", {"output_index": index, "item": added})
        yield event("response.output_item.done", {"output_index": index, "item": item})
    yield event("response.completed", {"response": response})
