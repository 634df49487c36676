"""Reading chat-completions replies, whichever SDK produced them.

The ``openai`` and ``zai`` SDKs both return pydantic objects in the same
chat-completions shape (``choices[0].message``, ``delta``, ``usage``), and both
keep fields outside their schemas (``reasoning_content``, Moonshot's per-choice
``usage``, GLM's ``web_search``) as extra attributes. Reading them by name here,
rather than through either SDK's types, lets one parser serve every plugin.
:class:`Round` is the normalised outcome of one provider request.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from exai.providers.base import Delta, Usage

__all__ = ["Round", "StreamAssembler", "field_of", "round_from_completion", "usage_from"]


@dataclass(slots=True)
class Round:
    """What one provider request produced."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    search_results: list[dict[str, Any]] = field(default_factory=list)
    retries: int = 0


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` or ``obj[name]``: SDK models keep unknown fields either way."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return default if value is None else value


def usage_from(obj: Any) -> Usage | None:
    """A vendor's ``usage`` object as :class:`Usage`.

    Cached prompt tokens are where each vendor puts them: Z.ai and Moonshot's K2
    models in ``prompt_tokens_details.cached_tokens`` (the OpenAI shape), Moonshot's
    explicit context cache (moonshot-v1) at the top, as ``cached_tokens``.
    """
    if obj is None:
        return None
    details = field_of(obj, "completion_tokens_details")
    prompt_details = field_of(obj, "prompt_tokens_details")
    prompt = int(field_of(obj, "prompt_tokens", 0))
    cached = field_of(prompt_details, "cached_tokens") or field_of(obj, "cached_tokens", 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=int(field_of(obj, "completion_tokens", 0)),
        reasoning_tokens=int(field_of(details, "reasoning_tokens", 0)),
        cached_prompt_tokens=min(int(cached), prompt) if prompt else int(cached),
    )


def _tool_call_dict(call: Any) -> dict[str, Any]:
    function = field_of(call, "function")
    arguments = field_of(function, "arguments", "")
    if not isinstance(arguments, str):  # Z.ai documents an object; its SDK and API send text
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": field_of(call, "id", ""),
        "type": field_of(call, "type", "function"),
        "function": {"name": field_of(function, "name", ""), "arguments": arguments},
    }


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def round_from_completion(completion: Any) -> Round:
    choices = field_of(completion, "choices", [])
    choice = choices[0] if choices else None
    message = field_of(choice, "message")
    usage = usage_from(field_of(completion, "usage")) or usage_from(field_of(choice, "usage"))
    return Round(
        text=field_of(message, "content", "") or "",
        reasoning=field_of(message, "reasoning_content", "") or "",
        tool_calls=[_tool_call_dict(c) for c in field_of(message, "tool_calls", []) or []],
        finish_reason=field_of(choice, "finish_reason"),
        usage=usage or Usage(),
        search_results=[_plain(r) for r in field_of(completion, "web_search", []) or []],
    )


@dataclass(slots=True)
class _Call:
    """A tool call being assembled from stream pieces."""

    call: dict[str, Any]
    shown: int | None = None  # its index among the caller's calls, once announced
    decided: bool = False  # whether it is the caller's has been settled


class StreamAssembler:
    """Turns stream chunks into deltas while assembling the :class:`Round`.

    Tool calls arrive in pieces keyed by ``index``: the id and name first, then the
    arguments, whole (Z.ai without ``tool_stream``) or in pieces. A call to one of
    the caller's tools is announced as soon as its name is known (a ``tool_call``
    delta with its id and name) and its arguments follow as ``tool_arguments``
    deltas as they arrive, renumbered over the caller's calls only. Calls to tools
    the plugin answers itself (``own_tools``, Kimi's ``$web_search``) produce no
    deltas. At most ``max_client_calls`` of the caller's calls are announced (the
    rest are left out of the answer too, see the exchange).
    """

    def __init__(
        self, *, own_tools: frozenset[str] = frozenset(), max_client_calls: int | None = None
    ) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._search: list[dict[str, Any]] = []
        self._own = own_tools
        self._max_shown = max_client_calls
        self._shown = 0

    def feed(self, chunk: Any) -> list[Delta]:
        out: list[Delta] = []
        usage = usage_from(field_of(chunk, "usage"))
        search = field_of(chunk, "web_search")
        if search:
            self._search.extend(_plain(r) for r in search)
        for choice in field_of(chunk, "choices", []) or []:
            delta = field_of(choice, "delta")
            reasoning = field_of(delta, "reasoning_content")
            if reasoning:
                self._reasoning.append(reasoning)
                out.append(Delta("reasoning", text=reasoning))
            content = field_of(delta, "content")
            if content:
                self._text.append(content)
                out.append(Delta("text", text=content))
            for piece in field_of(delta, "tool_calls", []) or []:
                out.extend(self._merge_call(piece))
            usage = usage or usage_from(field_of(choice, "usage"))
            finish = field_of(choice, "finish_reason")
            if finish:
                self._finish = finish
        if usage is not None:
            self._usage = usage
        return out

    def _merge_call(self, piece: Any) -> list[Delta]:
        index = int(field_of(piece, "index", len(self._calls)))
        entry = self._calls.get(index)
        if entry is None:
            entry = self._calls[index] = _Call(
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
        call = entry.call
        # The first id is the one announced; a vendor that repeats ids on later
        # pieces (or varies them) does not change it.
        call["id"] = call["id"] or field_of(piece, "id") or ""
        call["type"] = field_of(piece, "type") or call["type"]
        function = field_of(piece, "function")
        # A name arrives whole with a call's first piece; some GLM servers repeat it on
        # every piece, so the first one stands rather than the pieces joined.
        call["function"]["name"] = call["function"]["name"] or field_of(function, "name", "") or ""
        arguments = field_of(function, "arguments", "") or ""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call["function"]["arguments"] += arguments
        if not entry.decided:
            if not call["function"]["name"]:
                return []
            entry.decided = True
            mine = call["function"]["name"] not in self._own
            if not mine or (self._max_shown is not None and self._shown >= self._max_shown):
                return []
            entry.shown, self._shown = self._shown, self._shown + 1
            call["id"] = call["id"] or f"call_{uuid.uuid4().hex[:24]}"
            start = {"id": call["id"], "type": "function",
                     "function": {"name": call["function"]["name"], "arguments": ""}}  # fmt: skip
            out = [Delta("tool_call", index=entry.shown, tool_call=start)]
            so_far = call["function"]["arguments"]
            if so_far:
                out.append(Delta("tool_arguments", index=entry.shown, text=so_far))
            return out
        if entry.shown is not None and arguments:
            return [Delta("tool_arguments", index=entry.shown, text=arguments)]
        return []

    def result(self) -> Round:
        return Round(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=[self._calls[i].call for i in sorted(self._calls)],
            finish_reason=self._finish,
            usage=self._usage or Usage(),
            search_results=self._search,
        )
