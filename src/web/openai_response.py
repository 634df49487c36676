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
the request. The ``openai`` SDK keeps unknown fields, so ``completion.exai`` reads it.
"""

from __future__ import annotations

from typing import Any

from exai.protocol import CallToolResult, ErrorInfo, ModelAnswer, StreamEvent
from exai.web.event_stream import PING, sse
from exai.web.model_shared import answer_notes, exai_envelope
from exai.web.openai_errors import error_body
from exai.web.openai_request import CompletionCall

__all__ = [
    "ChunkWriter",
    "completion_body",
    "exai_fields",
    "model_list",
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


def exai_fields(
    call: CompletionCall, result: CallToolResult, answer: ModelAnswer
) -> dict[str, Any]:
    head: dict[str, Any] = {"tool": result.metadata.tool}
    if call.thread is not None:
        head["continuation_id"] = result.metadata.continuation_id
        head["thread_started"] = call.thread == "new"
    notes = answer_notes(call, answer)
    if call.legacy and len(answer.tool_calls) > 1:
        notes.append(
            {
                "param": "functions",
                "message": f"the model called {len(answer.tool_calls)} "
                "functions at once; function_call carries the first only",
            }
        )
    tail = {"messages_ignored": call.messages_ignored} if call.messages_ignored else None
    return exai_envelope(result, answer, notes, head=head, tail=tail)


def _finish_reason(call: CompletionCall, answer: ModelAnswer) -> str:
    reason = answer.finish_reason or "stop"
    return "function_call" if call.legacy and reason == "tool_calls" else reason


def completion_body(
    call: CompletionCall, result: CallToolResult, text: str, *, completion_id: str, created: int
) -> dict[str, Any]:
    """A ``chat.completion`` object for a successful result whose answer is ``text``."""
    answer = ModelAnswer.of(result.metadata)
    calls = answer.tool_calls
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text if text or not calls else None,
        "refusal": None,
    }
    if calls and call.legacy:
        message["function_call"] = calls[0]["function"]
    elif calls:
        message["tool_calls"] = calls
    if answer.reasoning is not None:
        # Where Moonshot and other OpenAI-compatible servers put a model's reasoning.
        message["reasoning_content"] = answer.reasoning
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
                "finish_reason": _finish_reason(call, answer),
            }
        ],
        "usage": usage_body(result.metadata.usage),
        "system_fingerprint": None,
        "exai": exai_fields(call, result, answer),
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

    def chunk(self, event: StreamEvent) -> dict[str, Any] | None:
        """The chunk for one model event, or None for one that carries nothing."""
        kind = event.kind
        if kind == "text" and event.text:
            return self._chunk({"content": event.text})
        if kind == "reasoning" and event.text:
            return self._chunk({"reasoning_content": event.text})
        if kind == "tool_call" and event.tool_call is not None:
            name = event.tool_call["function"]["name"]
            if self.call.legacy:
                return self._chunk({"function_call": {"name": name, "arguments": ""}})
            return self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": event.index,
                            "id": event.tool_call["id"],
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        if kind == "tool_arguments" and event.text:
            if self.call.legacy:
                return self._chunk({"function_call": {"arguments": event.text}})
            return self._chunk(
                {"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]}
            )
        return None

    def last(self, result: CallToolResult) -> list[dict[str, Any]]:
        """The chunk that ends the choice, and the usage chunk if it was asked for."""
        self.head["model"] = result.metadata.model or self.call.model
        answer = ModelAnswer.of(result.metadata)
        end = self._chunk({}, _finish_reason(self.call, answer))
        end["exai"] = exai_fields(self.call, result, answer)
        chunks = [end]
        if self.call.include_usage:
            chunks.append({**self.head, "choices": [], "usage": usage_body(result.metadata.usage)})
        return chunks

    # --- as a StreamEncoder ---------------------------------------------------

    def opening(self) -> bytes:
        return sse(self.first())

    def delta(self, event: StreamEvent) -> bytes:
        chunk = self.chunk(event)
        return b"" if chunk is None else sse(chunk)

    def closing(self, result: CallToolResult) -> bytes:
        return b"".join(sse(chunk) for chunk in self.last(result)) + sse("[DONE]")

    def failure(self, info: ErrorInfo) -> bytes:
        return sse(error_body(info))

    def ping(self) -> bytes:
        return PING


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
