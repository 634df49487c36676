"""exai results in OpenAI's shapes: completions, stream chunks, the model list.

Pure functions over a :class:`~exai.protocol.CallToolResult`, so every field a
client reads is tested without a daemon. A model that calls the caller's tools
answers with ``message.tool_calls`` (``id``, ``type: "function"``,
``function.name``, ``function.arguments`` as a JSON string) and
``finish_reason: "tool_calls"``; streamed, with ``delta.tool_calls`` pieces whose
first carries the call's ``index``, ``id`` and name and the rest its arguments.
A request made with the legacy ``functions`` gets ``message.function_call`` and
``finish_reason: "function_call"`` instead.

Beside OpenAI's own fields, each completion (and the last chunk of a stream)
carries ``exai``: the thread's ``continuation_id``, the model that answered, the
audit trail's ``request_id``, the cost and ``notes``, what exai adapted to serve
the request. The ``openai`` SDK keeps unknown fields, so ``completion.exai`` (or
``completion.model_extra["exai"]``) reads it.
"""

from __future__ import annotations

from typing import Any

from exai.protocol import CallToolResult, ErrorInfo
from exai.web.model_call import ModelCall
from exai.web.model_stream import sse
from exai.web.openai_errors import error_body
from exai.web.openai_request import CompletionCall

__all__ = [
    "ChunkWriter",
    "completion_body",
    "exai_fields",
    "model_list",
    "notes_of",
    "usage_body",
]


def usage_body(usage: dict[str, Any] | None) -> dict[str, Any]:
    """exai's usage (``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``,
    ``cached_prompt_tokens``) in the OpenAI shape."""
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": int(usage.get("cached_prompt_tokens", 0))},
        "completion_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))},
    }


def notes_of(call: ModelCall, result: CallToolResult) -> list[dict[str, str]]:
    """What the face and the tool adapted to serve the request, face first."""
    extra = result.metadata.model_extra or {}
    tool_notes = [n for n in extra.get("notes") or [] if isinstance(n, dict)]
    return [note.as_dict() for note in call.notes] + tool_notes


def exai_fields(call: CompletionCall, result: CallToolResult) -> dict[str, Any]:
    meta = result.metadata
    fields: dict[str, Any] = {"request_id": result.request_id, "tool": meta.tool}
    if call.thread is not None:
        fields["continuation_id"] = meta.continuation_id
        fields["thread_started"] = call.thread == "new"
    fields["model"] = meta.model
    fields["provider"] = meta.provider
    extra = meta.model_extra or {}
    fields["cost"] = meta.cost  # OpenAI has no field for it; null when unpriced
    for key in ("fallback_from", "turns_dropped", "trace_id"):
        if extra.get(key):
            fields[key] = extra[key]
    notes = notes_of(call, result)
    calls = _tool_calls(result)
    if call.legacy and len(calls) > 1:
        notes.append(
            {
                "param": "functions",
                "message": f"the model called {len(calls)} "
                "functions at once; function_call carries the first only",
            }
        )
    if notes:
        fields["notes"] = notes
    if call.messages_ignored:
        fields["messages_ignored"] = call.messages_ignored
    return fields


def _finish_reason(call: CompletionCall, result: CallToolResult) -> str:
    reason = (result.metadata.model_extra or {}).get("finish_reason") or "stop"
    return "function_call" if call.legacy and reason == "tool_calls" else str(reason)


def _tool_calls(result: CallToolResult) -> list[dict[str, Any]]:
    calls = (result.metadata.model_extra or {}).get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict)]


def completion_body(
    call: CompletionCall, result: CallToolResult, text: str, *, completion_id: str, created: int
) -> dict[str, Any]:
    """A ``chat.completion`` object for a successful result whose answer is ``text``."""
    extra = result.metadata.model_extra or {}
    calls = _tool_calls(result)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text if text or not calls else None,
        "refusal": None,
    }
    if calls and call.legacy:
        message["function_call"] = calls[0]["function"]
    elif calls:
        message["tool_calls"] = calls
    if isinstance(extra.get("reasoning"), str):
        # Where Moonshot and other OpenAI-compatible servers put a model's reasoning.
        message["reasoning_content"] = extra["reasoning"]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": result.metadata.model or call.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(call, result),
            }
        ],
        "usage": usage_body(result.metadata.usage),
        "system_fingerprint": None,
        "exai": exai_fields(call, result),
    }


class ChunkWriter:
    """The ``chat.completion.chunk`` events of one stream, in order (a
    :class:`~exai.web.model_stream.StreamEncoder`).

    The model that answers is known only when the call ends (``model: "auto"``
    and fallback choose it), so chunks before the last name the requested one.
    With ``include_usage`` every chunk has ``usage: null`` and one more chunk,
    with no choices, carries the totals, as OpenAI's streams do.
    """

    def __init__(self, call: CompletionCall, *, completion_id: str, created: int) -> None:
        self.call = call
        self.head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": call.model,
            "system_fingerprint": None,
        }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = {**self.head, "choices": [choice]}
        if self.call.include_usage:
            chunk["usage"] = None
        return chunk

    def first(self) -> dict[str, Any]:
        return self._chunk({"role": "assistant", "content": ""})

    def chunk(self, delta: Any) -> dict[str, Any] | None:
        """The chunk for one model event, or None for one that has none (usage)."""
        kind = getattr(delta, "kind", None)
        if kind == "text" and delta.text:
            return self._chunk({"content": delta.text})
        if kind == "reasoning" and delta.text:
            return self._chunk({"reasoning_content": delta.text})
        if kind == "tool_call":
            function = (delta.tool_call or {}).get("function") or {}
            if self.call.legacy:
                return self._chunk(
                    {"function_call": {"name": function.get("name"), "arguments": ""}}
                )
            return self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": delta.index,
                            "id": (delta.tool_call or {}).get("id"),
                            "type": "function",
                            "function": {"name": function.get("name"), "arguments": ""},
                        }
                    ]
                }
            )
        if kind == "tool_arguments" and delta.text:
            if self.call.legacy:
                return self._chunk({"function_call": {"arguments": delta.text}})
            return self._chunk(
                {"tool_calls": [{"index": delta.index, "function": {"arguments": delta.text}}]}
            )
        return None

    def last(self, result: CallToolResult) -> list[dict[str, Any]]:
        """The chunk that ends the choice, and the usage chunk if it was asked for."""
        self.head["model"] = result.metadata.model or self.call.model
        end = self._chunk({}, _finish_reason(self.call, result))
        end["exai"] = exai_fields(self.call, result)
        chunks = [end]
        if self.call.include_usage:
            chunks.append({**self.head, "choices": [], "usage": usage_body(result.metadata.usage)})
        return chunks

    # --- as a StreamEncoder ---------------------------------------------------

    def opening(self) -> bytes:
        return sse(self.first())

    def delta(self, delta: Any) -> bytes:
        chunk = self.chunk(delta)
        return b"" if chunk is None else sse(chunk)

    def closing(self, result: CallToolResult) -> bytes:
        return b"".join(sse(chunk) for chunk in self.last(result)) + sse("[DONE]")

    def failure(self, info: ErrorInfo) -> bytes:
        return sse(error_body(info))

    def ping(self) -> bytes:
        return b": ping\n\n"  # an SSE comment, which every client skips


# What a model entry tells about its model, from the registry's description.
_DESCRIBED = (
    "provider",
    "context_window",
    "max_output_tokens",
    "thinking",
    "web_search",
    "images",
    "aliases",
)


def model_list(models: list[dict[str, Any]], auto_model: str | None) -> dict[str, Any]:
    """``GET /v1/models``: ``auto``, then each configured model, then its aliases.

    ``models`` is the provider registry's description of its catalogue;
    ``auto_model`` is what ``"auto"`` chooses for a plain request (None when
    nothing can be chosen).
    """
    auto_fields: dict[str, Any] = {"auto": True}
    if auto_model is not None:
        auto_fields["routes_to"] = auto_model
    data = [_model("auto", "exai", auto_fields)]
    aliases = []
    for model in models:
        if not model.get("configured"):
            continue
        fields: dict[str, Any] = {key: model[key] for key in _DESCRIBED if key in model}
        data.append(_model(model["name"], model["provider"], fields))
        aliases += [
            _model(alias, model["provider"], {"alias_of": model["name"]})
            for alias in model.get("aliases", [])
        ]
    return {"object": "list", "data": data + aliases}


def _model(name: str, owner: str, fields: dict[str, Any]) -> dict[str, Any]:
    # ``created`` is when a model was published; exai does not know it.
    return {"id": name, "object": "model", "created": 0, "owned_by": owner, "exai": fields}
