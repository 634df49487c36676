"""exai results in OpenAI's shapes: completions, stream chunks, the model list.

Pure functions over a :class:`~exai.protocol.CallToolResult`, so every field a
client reads is tested without a daemon. Beside OpenAI's own fields, each
completion (and the last chunk of a stream) carries ``exai``: the thread's
``continuation_id``, the model that answered, the audit trail's ``request_id``
and what the request asked for that exai did not use. The ``openai`` SDK keeps
unknown fields, so ``completion.exai`` (or ``completion.model_extra["exai"]``)
reads it.
"""

from __future__ import annotations

import json
from typing import Any

from exai.protocol import CallToolResult
from exai.web.openai_request import CompletionCall

__all__ = [
    "ChunkWriter",
    "completion_body",
    "exai_fields",
    "model_list",
    "result_text",
    "sse",
    "usage_body",
]


def result_text(result: CallToolResult) -> str:
    return "\n\n".join(output.text for output in result.outputs)


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
    if call.ignored:
        fields["ignored"] = list(call.ignored)
    if call.messages_ignored:
        fields["messages_ignored"] = call.messages_ignored
    return fields


def completion_body(
    call: CompletionCall, result: CallToolResult, text: str, *, completion_id: str, created: int
) -> dict[str, Any]:
    """A ``chat.completion`` object for a successful result whose answer is ``text``."""
    extra = result.metadata.model_extra or {}
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if isinstance(extra.get("reasoning"), str):
        # Where Moonshot and other OpenAI-compatible servers put a model's reasoning.
        message["reasoning_content"] = extra["reasoning"]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": result.metadata.model or call.model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": extra.get("finish_reason") or "stop"}],
        "usage": usage_body(result.metadata.usage),
        "system_fingerprint": None,
        "exai": exai_fields(call, result),
    }  # fmt: skip


class ChunkWriter:
    """The ``chat.completion.chunk`` objects of one stream, in order.

    The model that answers is known only when the call ends (``model: "auto"``
    and fallback choose it), so chunks before the last name the requested one.
    With ``include_usage`` every chunk has ``usage: null`` and one more chunk,
    with no choices, carries the totals, as OpenAI's streams do.
    """

    def __init__(self, call: CompletionCall, *, completion_id: str, created: int) -> None:
        self.call = call
        self.head = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                     "model": call.model, "system_fingerprint": None}  # fmt: skip

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = {**self.head, "choices": [choice]}
        if self.call.include_usage:
            chunk["usage"] = None
        return chunk

    def first(self) -> dict[str, Any]:
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, text: str) -> dict[str, Any]:
        return self._chunk({"content": text})

    def last(self, result: CallToolResult) -> list[dict[str, Any]]:
        """The chunk that ends the choice, and the usage chunk if it was asked for."""
        extra = result.metadata.model_extra or {}
        self.head["model"] = result.metadata.model or self.call.model
        end = self._chunk({}, extra.get("finish_reason") or "stop")
        end["exai"] = exai_fields(self.call, result)
        chunks = [end]
        if self.call.include_usage:
            chunks.append({**self.head, "choices": [], "usage": usage_body(result.metadata.usage)})
        return chunks


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event; a string (``[DONE]``) goes as it is."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


# What a model entry tells about its model, from the registry's description.
_DESCRIBED = ("provider", "context_window", "max_output_tokens", "thinking", "web_search",
              "images", "aliases")  # fmt: skip


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
        aliases += [_model(alias, model["provider"], {"alias_of": model["name"]})
                    for alias in model.get("aliases", [])]  # fmt: skip
    return {"object": "list", "data": data + aliases}


def _model(name: str, owner: str, fields: dict[str, Any]) -> dict[str, Any]:
    # ``created`` is when a model was published; exai does not know it.
    return {"id": name, "object": "model", "created": 0, "owned_by": owner, "exai": fields}
