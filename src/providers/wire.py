"""Reading chat-completions replies, whichever SDK produced them.

The ``openai`` and ``zai`` SDKs both return pydantic objects in the same
chat-completions shape (``choices[0].message``, ``delta``, ``usage``), and both
keep fields outside their schemas (``reasoning_content``, Moonshot's per-choice
``usage``, GLM's ``web_search``) as extra attributes. Reading them by name here,
rather than through either SDK's types, lets one parser serve every plugin.
:class:`Round` is the normalised outcome of one provider request.
"""

from __future__ import annotations

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
    return {
        "id": field_of(call, "id", ""),
        "type": field_of(call, "type", "function"),
        "function": {
            "name": field_of(function, "name", ""),
            "arguments": field_of(function, "arguments", ""),
        },
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


class StreamAssembler:
    """Turns stream chunks into deltas while assembling the :class:`Round`.

    Tool calls arrive in pieces keyed by ``index`` (id and name first, arguments
    possibly split); they are emitted as one ``tool_call`` delta each once the
    round is complete, because a partial call is of no use to anyone.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._search: list[dict[str, Any]] = []

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
                self._merge_call(piece)
            usage = usage or usage_from(field_of(choice, "usage"))
            finish = field_of(choice, "finish_reason")
            if finish:
                self._finish = finish
        if usage is not None:
            self._usage = usage
        return out

    def _merge_call(self, piece: Any) -> None:
        index = int(field_of(piece, "index", len(self._calls)))
        call = self._calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        call["id"] = field_of(piece, "id") or call["id"]
        call["type"] = field_of(piece, "type") or call["type"]
        function = field_of(piece, "function")
        call["function"]["name"] += field_of(function, "name", "") or ""
        call["function"]["arguments"] += field_of(function, "arguments", "") or ""

    def result(self) -> Round:
        return Round(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=[self._calls[i] for i in sorted(self._calls)],
            finish_reason=self._finish,
            usage=self._usage or Usage(),
            search_results=self._search,
        )
