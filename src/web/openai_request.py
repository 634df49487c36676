"""From an OpenAI chat-completions request to one exai tool call, with no I/O.

A request runs in one of two modes, chosen by whether it names an exai thread
(the ``X-Exai-Thread`` header or ``metadata.exai_thread``):

- **Stateless**: the request becomes a ``completion`` call, and the messages go
  to the model as given (a ``developer`` message as ``system``, which Kimi and
  GLM know), with the caller's function tools (``tools``, or the legacy
  ``functions``), ``tool_choice``, ``parallel_tool_calls`` and sampling
  parameters. The model's calls of those tools come back in OpenAI's shape.
  ``reasoning_effort`` goes to the core as it is (the core sends each model the
  knob it has, a level or a thinking switch, and notes what it did); ``thinking``,
  Moonshot's and Z.ai's own switch, is the call's ``thinking_mode``.
- **Thread**: ``"new"`` starts a conversation, a ``continuation_id`` continues
  one. The request becomes a ``chat`` call: its last message, which must be the
  user's, is the prompt, and exai adds the history from its store exactly as it
  does for any ``chat`` call; the rest of the request's messages are not sent
  (the answer says how many). On a new thread, the request's system messages
  become the thread's own system prompt, kept for its life. ``chat`` takes no
  client tools and no sampling parameters but ``temperature``, so those are
  refused in this mode.

Every field is applied, adapted with a note, or refused naming it
(:mod:`exai.web.model_call`); a field this module does not know is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exai.protocol import UUID_PATTERN
from exai.web.model_call import (
    ModelCall,
    RequestRefused,
    check_known,
    want_bool,
    want_dict,
    want_list,
    want_number,
)
from exai.web.model_shared import apply_thinking, client_ref, effort_level
from exai.web.openai_legacy import LEGACY_FIELDS, legacy_messages, legacy_tools

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
# Every field a request may set. Sampling and tool fields apply without a thread only.
_FIELDS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "metadata",
        "n",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "top_p",
        "seed",
        "response_format",
        "user",
        "safety_identifier",
        "logprobs",
        "modalities",
        "store",
        "reasoning_effort",
        "thinking",
        *LEGACY_FIELDS,
    }
)
_STATELESS_ONLY = (
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "top_p",
    "seed",
    "response_format",
    "max_tokens",
    "max_completion_tokens",
    "reasoning_effort",
    "thinking",
    *LEGACY_FIELDS,
)


@dataclass(frozen=True)
class CompletionCall(ModelCall):
    """The tool call that answers one request, and how to answer."""

    include_usage: bool = False
    thread: str | None = None  # NEW_THREAD, a continuation_id, or None
    messages_ignored: int = 0  # thread mode: messages exai's history stands in for
    legacy: bool = False  # asked with ``functions``: answer with ``function_call``


def parse_request(body: Any, headers: Mapping[str, str]) -> CompletionCall:
    """The call for ``body`` (the parsed JSON) and ``headers`` (lower-case names).

    Raises :class:`~exai.web.model_call.RequestRefused` for a request that cannot
    be served.
    """
    if not isinstance(body, dict):
        raise RequestRefused("the request body must be a JSON object")
    check_known(body, _FIELDS)
    model = body.get("model") or "auto"
    if not isinstance(model, str):
        raise RequestRefused("model must be a string", param="model")
    _refuse_what_cannot_be_honoured(body)
    stream = body.get("stream") is not None and want_bool(body["stream"], "stream")
    include_usage = _include_usage(body.get("stream_options"), stream)
    ref = client_ref(body, ("safety_identifier", "user"))
    thread = _thread(body, headers)
    arguments: dict[str, Any] = {"model": model}
    if body.get("temperature") is not None:
        arguments["temperature"] = want_number(body["temperature"], "temperature")
    raw = _messages(body.get("messages"))
    common: dict[str, Any] = {
        "face": "openai",
        "model": model,
        "stream": stream,
        "client_ref": ref,
        "include_usage": include_usage,
    }
    if thread is None:
        legacy = _stateless(body, raw, arguments)
        return CompletionCall(arguments=arguments, legacy=legacy, **common)
    return _thread_call(body, raw, arguments, thread, common)


def _stateless(body: dict[str, Any], raw: list[dict[str, Any]], arguments: dict[str, Any]) -> bool:
    """Apply a stateless request's fields; whether it asked in the legacy functions' terms."""
    legacy = any(body.get(key) is not None for key in LEGACY_FIELDS)
    if legacy and any(body.get(key) is not None for key in ("tools", "tool_choice")):
        raise RequestRefused(
            "send either tools and tool_choice or the legacy functions and function_call, not both",
            param="functions",
        )
    arguments["messages"] = legacy_messages(raw)
    if legacy:
        tools, choice = legacy_tools(body.get("functions"), body.get("function_call"))
        arguments["tools"] = tools
        if choice is not None:
            arguments["tool_choice"] = choice
        arguments["parallel_tool_calls"] = False  # function_call carries one call
    else:
        if body.get("tools") is not None:
            arguments["tools"] = want_list(body["tools"], "tools")
        if body.get("tool_choice") is not None:
            arguments["tool_choice"] = body["tool_choice"]
    if body.get("parallel_tool_calls") is not None:
        arguments["parallel_tool_calls"] = want_bool(
            body["parallel_tool_calls"], "parallel_tool_calls"
        )
    for key in ("stop", "seed", "response_format"):
        if body.get(key) is not None:
            arguments[key] = body[key]
    if body.get("top_p") is not None:
        arguments["top_p"] = want_number(body["top_p"], "top_p")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        arguments["max_tokens"] = max_tokens
    _thinking(body, arguments)
    return legacy


def _thinking(body: dict[str, Any], arguments: dict[str, Any]) -> None:
    """``thinking`` (Moonshot's and Z.ai's own switch) or ``reasoning_effort``."""
    thinking, effort = body.get("thinking"), body.get("reasoning_effort")
    if thinking is not None and effort is not None:
        raise RequestRefused("send thinking or reasoning_effort, not both", param="thinking")
    kind = None
    if thinking is not None:
        kind = want_dict(thinking, "thinking").get("type")
        check_known(thinking, ("type",), "thinking.")
        if kind not in ("enabled", "disabled"):
            raise RequestRefused('thinking.type is "enabled" or "disabled"', param="thinking.type")
    level = None if effort is None else effort_level(effort, "reasoning_effort")
    apply_thinking(arguments, kind, level)


def _thread_call(
    body: dict[str, Any],
    messages: list[dict[str, Any]],
    arguments: dict[str, Any],
    thread: str,
    common: dict[str, Any],
) -> CompletionCall:
    for key in _STATELESS_ONLY:
        if body.get(key) is not None:
            raise RequestRefused(
                f"with an exai thread the request is a chat call, which takes no {key}; "
                "send it without a thread (stateless) to use it",
                param=key,
                code="unsupported_parameter",
            )
    last = messages[-1]
    if last["role"] != "user":
        raise RequestRefused(
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
    return CompletionCall(
        arguments=arguments,
        tool="chat",
        thread=thread,
        messages_ignored=len(messages) - used,
        **common,
    )


def _messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise RequestRefused("messages must be a non-empty array", param="messages")
    out = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestRefused(
                "each message must be an object with a role", param=f"messages[{index}]"
            )
        if message["role"] == "developer":
            message = {**message, "role": "system"}
        out.append(message)
    return out


def _refuse_what_cannot_be_honoured(body: dict[str, Any]) -> None:
    if body.get("n") not in (None, 1):
        raise RequestRefused("exai returns one choice; n must be 1", param="n")
    if body.get("logprobs"):
        raise RequestRefused(
            "exai does not return logprobs", param="logprobs", code="unsupported_parameter"
        )
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise RequestRefused(
            'exai replies in text only: modalities can only be ["text"]',
            param="modalities",
            code="unsupported_parameter",
        )
    if body.get("store"):
        raise RequestRefused(
            "exai does not keep chat completions for OpenAI's stored-completions API; "
            "name an exai thread (X-Exai-Thread) to have exai keep the conversation",
            param="store",
            code="unsupported_parameter",
        )


def _include_usage(options: Any, stream: bool) -> bool:
    if options is None:
        return False
    want_dict(options, "stream_options")
    check_known(options, ("include_usage",), "stream_options.")
    if not stream:
        raise RequestRefused("stream_options goes with stream: true", param="stream_options")
    return options.get("include_usage") is True


def _thread(body: dict[str, Any], headers: Mapping[str, str]) -> str | None:
    metadata = body.get("metadata")
    if metadata is not None:
        want_dict(metadata, "metadata")
        check_known(metadata, (THREAD_METADATA_KEY,), "metadata.")
    from_body = (metadata or {}).get(THREAD_METADATA_KEY)
    from_header = headers.get(THREAD_HEADER)
    if from_body is not None and from_header is not None and from_body != from_header:
        raise RequestRefused(
            f"the X-Exai-Thread header and metadata.{THREAD_METADATA_KEY} name different threads",
            param=f"metadata.{THREAD_METADATA_KEY}",
        )
    value = from_header if from_header is not None else from_body
    if value is None:
        return None
    param = "X-Exai-Thread" if from_header is not None else f"metadata.{THREAD_METADATA_KEY}"
    if not isinstance(value, str):
        raise RequestRefused("an exai thread is named by a string", param=param)
    value = value.strip()
    if value.lower() == NEW_THREAD:
        return NEW_THREAD
    if not _UUID.match(value):
        raise RequestRefused(
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
        raise RequestRefused(
            "with an exai thread, messages carry text only (send images without a thread)",
            param=f"messages[{index}].content",
        )
    if not content.strip():
        raise RequestRefused("the message is empty", param=f"messages[{index}].content")
    return content
