"""From an OpenAI chat-completions request to one exai tool call, with no I/O.

A request runs in one of two modes, chosen by whether it names an exai thread
(the ``X-Exai-Thread`` header or ``metadata.exai_thread``):

- **Thread**: ``"new"`` starts a conversation, a ``continuation_id`` continues
  one. The request becomes a ``chat`` call: its last message, which must be the
  user's, is the prompt, and exai adds the history from its store exactly as it
  does for any ``chat`` call; the rest of the request's messages are not sent.
  On a new thread, the request's system messages become the thread's own
  system prompt, kept for its life.
- **Stateless**: the request becomes a ``completion`` call, and the messages go
  to the model as given (a ``developer`` message as ``system``, which Kimi and
  GLM know).

What exai cannot honour is refused (400) when ignoring it would change what the
caller gets back (``n`` > 1, client tools, JSON response formats, logprobs,
audio). Sampling settings exai does not pass on (``top_p``, ``stop``, ``seed``...)
are ignored, and named in the response's ``exai.ignored``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exai.tools.chat import UUID_PATTERN
from exai.web.openai_errors import OpenAIRequestError

__all__ = [
    "NEW_THREAD",
    "THREAD_HEADER",
    "THREAD_METADATA_KEY",
    "CompletionCall",
    "parse_request",
]

THREAD_HEADER = "x-exai-thread"
THREAD_METADATA_KEY = "exai_thread"
NEW_THREAD = "new"

_UUID = re.compile(UUID_PATTERN)
# Fields this module reads; any other field a request sets is reported as ignored.
_READ = frozenset({
    "model", "messages", "stream", "stream_options", "temperature", "max_tokens",
    "max_completion_tokens", "metadata", "n", "tools", "functions", "tool_choice",
    "function_call", "response_format", "logprobs", "audio", "modalities",
})  # fmt: skip
_NO_TOOLS = (
    "exai's OpenAI-compatible endpoint does not pass client tools (function calling) to "
    "the model; send the request without {param}"
)


@dataclass(frozen=True, slots=True)
class CompletionCall:
    """The tool call that answers one request, and how to answer."""

    tool: str  # "chat" with a thread, "completion" without
    arguments: dict[str, Any]
    model: str  # as the request named it
    stream: bool = False
    include_usage: bool = False
    thread: str | None = None  # NEW_THREAD, a continuation_id, or None
    ignored: tuple[str, ...] = ()  # request fields exai did not use
    messages_ignored: int = 0  # thread mode: messages exai's history stands in for


def parse_request(body: Any, headers: Mapping[str, str]) -> CompletionCall:
    """The call for ``body`` (the parsed JSON) and ``headers`` (lower-case names).

    Raises :class:`~exai.web.openai_errors.OpenAIRequestError` for a request
    that cannot be served.
    """
    if not isinstance(body, dict):
        raise OpenAIRequestError("the request body must be a JSON object")
    model = body.get("model") or "auto"
    if not isinstance(model, str):
        raise OpenAIRequestError("model must be a string", param="model")
    messages = _messages(body.get("messages"))
    _refuse_what_cannot_be_honoured(body)
    stream = _flag(body, "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise OpenAIRequestError("stream_options must be an object", param="stream_options")
    include_usage = stream and options.get("include_usage") is True
    temperature = body.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float)
    ):
        raise OpenAIRequestError("temperature must be a number", param="temperature")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    ignored = sorted(key for key, value in body.items() if key not in _READ and value is not None)
    thread = _thread(body, headers)

    arguments: dict[str, Any] = {"model": model}
    if temperature is not None:
        arguments["temperature"] = temperature
    if thread is None:
        if max_tokens is not None:
            arguments["max_tokens"] = max_tokens
        arguments["messages"] = messages
        return CompletionCall("completion", arguments, model, stream, include_usage, None,
                              tuple(ignored))  # fmt: skip

    if max_tokens is not None:  # chat's replies are as long as the model makes them
        ignored.append("max_completion_tokens" if "max_completion_tokens" in body else "max_tokens")
    last = messages[-1]
    if last["role"] != "user":
        raise OpenAIRequestError(
            "with an exai thread, the last message must be the new user message; exai "
            "keeps the rest of the conversation",
            param="messages",
        )
    arguments["prompt"] = _text(last, len(messages) - 1)
    used = 1
    if thread == NEW_THREAD:
        system = [_text(m, i) for i, m in enumerate(messages) if m["role"] == "system"]
        if system:
            arguments["system_prompt"] = "\n\n".join(system)
            used += len(system)
    else:
        arguments["continuation_id"] = thread
    return CompletionCall("chat", arguments, model, stream, include_usage, thread,
                          tuple(sorted(ignored)), len(messages) - used)  # fmt: skip


def _messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise OpenAIRequestError("messages must be a non-empty array", param="messages")
    out = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise OpenAIRequestError(
                "each message must be an object with a role", param=f"messages[{index}]"
            )
        if message["role"] == "developer":
            message = {**message, "role": "system"}
        out.append(message)
    return out


def _refuse_what_cannot_be_honoured(body: dict[str, Any]) -> None:
    if body.get("n") not in (None, 1):
        raise OpenAIRequestError("exai returns one choice; n must be 1", param="n")
    for param in ("tools", "functions"):
        if body.get(param):
            raise OpenAIRequestError(_NO_TOOLS.format(param=param), param=param,
                                     code="unsupported_parameter")  # fmt: skip
    for param in ("tool_choice", "function_call"):
        if body.get(param) not in (None, "none", "auto"):
            raise OpenAIRequestError(_NO_TOOLS.format(param=param), param=param,
                                     code="unsupported_parameter")  # fmt: skip
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type", "text") != "text":
        raise OpenAIRequestError(
            "exai does not constrain replies to JSON; ask for JSON in the prompt instead",
            param="response_format",
            code="unsupported_parameter",
        )
    if body.get("logprobs"):
        raise OpenAIRequestError("exai does not return logprobs", param="logprobs",
                                 code="unsupported_parameter")  # fmt: skip
    modalities = body.get("modalities") or []
    if body.get("audio") is not None or (isinstance(modalities, list) and "audio" in modalities):
        raise OpenAIRequestError("exai replies in text only", param="audio",
                                 code="unsupported_parameter")  # fmt: skip


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise OpenAIRequestError(f"{key} must be true or false", param=key)
    return bool(value)


def _thread(body: dict[str, Any], headers: Mapping[str, str]) -> str | None:
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise OpenAIRequestError("metadata must be an object", param="metadata")
    from_body = (metadata or {}).get(THREAD_METADATA_KEY)
    from_header = headers.get(THREAD_HEADER)
    if from_body is not None and from_header is not None and from_body != from_header:
        raise OpenAIRequestError(
            f"the X-Exai-Thread header and metadata.{THREAD_METADATA_KEY} name different threads",
            param=f"metadata.{THREAD_METADATA_KEY}",
        )
    value = from_header if from_header is not None else from_body
    if value is None:
        return None
    param = "X-Exai-Thread" if from_header is not None else f"metadata.{THREAD_METADATA_KEY}"
    if not isinstance(value, str):
        raise OpenAIRequestError("an exai thread is named by a string", param=param)
    value = value.strip()
    if value.lower() == NEW_THREAD:
        return NEW_THREAD
    if not _UUID.match(value):
        raise OpenAIRequestError(
            f'an exai thread is "new" or the continuation_id of one, not {value[:64]!r}',
            param=param,
        )
    return value


def _text(message: dict[str, Any], index: int) -> str:
    """The text of a thread-mode message: a string, or text parts joined."""
    content = message.get("content")
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        content = "\n".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise OpenAIRequestError(
            "with an exai thread, messages carry text only (send images without a thread)",
            param=f"messages[{index}].content",
        )
    if not content.strip():
        raise OpenAIRequestError("the message is empty", param=f"messages[{index}].content")
    return content
