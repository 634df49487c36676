"""A provider request as an OpenTelemetry span, with GenAI's semantic conventions.

The registry opens one span per request it sends to a vendor (a fallback is a
second span beside the first; retries are events on the span): ``chat
{model}``, kind ``CLIENT``, with ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``
and the usage (``gen_ai.usage.input_tokens``, ``output_tokens``,
``cache_read.input_tokens``, ``reasoning.output_tokens``), plus exai's own
(cost, retries, the model a fallback stood in for). Prompt and completion text
(``gen_ai.input.messages``, ``gen_ai.output.messages``) are added only when
``EXAI_TRACE_CONTENT`` is on.

``gen_ai.provider.name`` uses the conventions' well-known value where there is
one (Moonshot: ``moonshot_ai``); Z.ai has none, so GLM is ``z_ai``, after the
conventions' pattern (``x_ai``, ``mistral_ai``); any other plugin is its name.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from exai import tracing

if TYPE_CHECKING:
    from exai.providers.base import ChatRequest, ChatResponse
    from exai.providers.catalogue import ModelInfo

__all__ = ["GENAI_PROVIDER", "finish_request_span", "first_chunk", "request_span"]

GENAI_PROVIDER = {"kimi": "moonshot_ai", "glm": "z_ai"}


def request_span(info: ModelInfo, request: ChatRequest, *, stream: bool) -> Any:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": GENAI_PROVIDER.get(info.provider, info.provider),
        "gen_ai.request.model": info.model_id,
        "gen_ai.request.stream": stream,
        "gen_ai.request.temperature": request.temperature,
        "gen_ai.request.max_tokens": request.max_output_tokens,
        "exai.model": info.name,
        "exai.messages": len(request.messages),
    }
    if tracing.state.content:
        attributes["gen_ai.input.messages"] = json.dumps(
            [_message(m) for m in request.messages], ensure_ascii=False
        )
    return tracing.span(f"chat {info.model_id}", kind=tracing.CLIENT, attributes=attributes)


def first_chunk(span: Any, started: float) -> None:
    """``gen_ai.response.time_to_first_chunk`` of a streamed answer, in seconds."""
    if span is not None and span.is_recording():
        span.set_attribute("gen_ai.response.time_to_first_chunk", time.monotonic() - started)


def finish_request_span(span: Any, response: ChatResponse, cost: Any = None) -> None:
    if span is None or not span.is_recording():
        return
    usage = response.usage
    attributes: dict[str, Any] = {
        "gen_ai.response.model": response.model,
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_prompt_tokens,
        "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
        "exai.retries": response.retries,
        "exai.cache_hit": usage.cached_prompt_tokens > 0,
    }
    if cost is not None:
        attributes["exai.cost.total"] = float(cost.total)
        attributes["exai.cost.currency"] = cost.currency
    if tracing.state.content:
        produced = response.messages or [{"role": "assistant", "content": response.text}]
        attributes["gen_ai.output.messages"] = json.dumps(
            [_message(m) for m in produced], ensure_ascii=False
        )
    tracing.set_attributes(span, attributes)


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """A provider message in the conventions' shape: ``{role, parts: [...]}``."""
    content = message.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append({"type": "text", "content": part.get("text", "")})
            elif isinstance(part, dict):
                parts.append({"type": str(part.get("type", "unknown"))})  # images: kind only
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": function.get("arguments")})  # fmt: skip
    if message.get("role") == "tool":
        parts = [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                  "result": content if isinstance(content, str) else None}]  # fmt: skip
    return {"role": message.get("role", "user"), "parts": parts}
