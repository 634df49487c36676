"""What Moonshot's and Z.ai's chat-completions endpoints send back, byte for byte
where it matters: error bodies, whole completions and SSE stream chunks.

Part of the provider emulator (a test fixture). The error bodies are the ones
the vendors document: Moonshot names an error ``type`` (platform.kimi.ai/docs/api/errors),
Z.ai a numeric business ``code`` as a string (docs.z.ai/api-reference/api-code,
whose table gives 1305 as "The API has triggered a rate limit." [G-8]). Kept
apart from the server so the formats can be read, and checked against the
vendors' documentation, in one place.

Z.ai reports a prompt longer than the model's context not as an error but as a
200 reply with empty content and ``finish_reason: "model_context_window_exceeded"``
(3p anomalyco/opencode#18813; code 1261, which the emulator used to send, is not
in Z.ai's table) [G-5]: the ``context_length`` kind has no Z.ai body, and the
server answers it with :func:`exai.emulators.replies.overflow_reply`.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ERROR_KINDS",
    "Reply",
    "Vendor",
    "completion_body",
    "default_error_kind",
    "error_body",
    "split_tokens",
    "sse",
    "stream_chunks",
]

Vendor = Literal["kimi", "glm"]

_TOKEN_RE = re.compile(r"\S+\s*")
# Characters of a tool call's arguments per streamed piece.
_ARGUMENT_PIECE = 8

# kind -> (HTTP status, Moonshot body, Z.ai body)
_ERRORS: dict[str, tuple[int, dict[str, Any], dict[str, Any] | None]] = {
    "context_length": (
        400,
        {"message": "Invalid request: Your request exceeded model token limit: {limit}",
         "type": "invalid_request_error"},
        None,  # Z.ai: a 200 with finish_reason "model_context_window_exceeded"
    ),
    "bad_request": (
        400,
        {"message": "Invalid request: invalid parameters", "type": "invalid_request_error"},
        {"code": "1214", "message": "Invalid messages parameter. Please check the documentation"},
    ),
    "invalid_request": (
        400,
        {"message": "Invalid request: {detail}", "type": "invalid_request_error"},
        {"code": "1214", "message": "{detail}"},
    ),
    # A parameter the API does not take in this request: Moonshot's message is the
    # bare reason ("tool_choice 'required' is incompatible with thinking enabled"),
    # Z.ai's code 1210 is "incorrect API call parameters".
    "invalid_param": (
        400,
        {"message": "{detail}", "type": "invalid_request_error"},
        {"code": "1210", "message": "{detail}"},
    ),
    "not_found": (
        404,
        {"message": "Not found the model {detail} or Permission denied",
         "type": "resource_not_found_error"},
        {"code": "1211", "message": "Unknown Model, please check the model code."},
    ),
    "auth": (
        401,
        {"message": "Invalid Authentication", "type": "invalid_authentication_error"},
        {"code": "1002", "message": "Invalid Authentication Token, please confirm the correct "
                                    "transmission of the Authentication Token"},
    ),
    "balance": (
        429,
        {"message": "Your account org-emulator<ak-emulator> is suspended, please check your "
                    "plan and billing details", "type": "exceeded_current_quota_error"},
        {"code": "1113",
         "message": "Insufficient balance or no resource package. Please recharge."},
    ),
    "rate_limit": (
        429,
        {"message": "Your account org-emulator<ak-emulator> request reached organization max "
                    "concurrency: 1, please try again after 1 seconds",
         "type": "rate_limit_reached_error"},
        {"code": "1302", "message": "High concurrency usage of this API, please reduce "
                                    "concurrency or contact customer service to increase limits"},
    ),
    "overloaded": (
        429,
        {"message": "The engine is currently overloaded, please try again later",
         "type": "engine_overloaded_error"},
        {"code": "1305", "message": "The API has triggered a rate limit."},
    ),
    "server": (
        500,
        {"message": "Unexpected server error", "type": "server_error"},
        {"code": "500", "message": "Internal Error"},
    ),
    "unavailable": (
        503,
        {"message": "Service temporarily unavailable", "type": "server_error"},
        {"code": "500", "message": "Service temporarily unavailable"},
    ),
}  # fmt: skip

ERROR_KINDS = frozenset(_ERRORS)


def default_error_kind(status: int, vendor: Vendor = "kimi") -> str:
    """The error a bare status stands for, when a script names no kind (a bare 400
    is Moonshot's context-length error, Z.ai's invalid-parameter one)."""
    if status == 400 and vendor == "glm":
        return "bad_request"
    return {400: "context_length", 401: "auth", 402: "balance", 403: "balance",
            429: "rate_limit", 500: "server"}.get(status, "unavailable" if status >= 500
                                                  else "bad_request")  # fmt: skip


def error_body(
    vendor: Vendor, kind: str, *, limit: int = 8192, detail: str = ""
) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of the vendor's error of this kind."""
    status, moonshot, zai = _ERRORS[kind]
    chosen = moonshot if vendor == "kimi" else zai
    if chosen is None:
        raise ValueError(f"{vendor} answers {kind!r} with a reply, not an error body")
    inner = dict(chosen)
    inner["message"] = inner["message"].format(limit=limit, detail=detail)
    return status, {"error": inner}


@dataclass
class Reply:
    """A reply in vendor-neutral form: text already cut into stream pieces."""

    pieces: list[str] = field(default_factory=list)
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, a prefix the vendor had seen before
    web_search: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def usage(self, vendor: Vendor) -> dict[str, Any]:
        """The usage object, with cached prompt tokens where each vendor puts them:
        Moonshot at the top and in ``prompt_tokens_details``, Z.ai in the latter."""
        completion = len(self.pieces) + len(self.reasoning.split())
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }
        if vendor == "kimi":
            usage["cached_tokens"] = self.cached_tokens
        usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage


def _message(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    return message


def completion_body(vendor: Vendor, seq: int, model: str, reply: Reply) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"chatcmpl-emu-{seq}",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": _message(reply), "finish_reason": reply.finish_reason}],
        "usage": reply.usage(vendor),
    }
    if vendor == "kimi":
        body["object"] = "chat.completion"
    else:
        body["request_id"] = f"emu-{seq}"
        if reply.web_search:
            body["web_search"] = reply.web_search
    return body


def stream_chunks(
    vendor: Vendor,
    seq: int,
    model: str,
    reply: Reply,
    *,
    tool_stream: bool = False,
    repeat_name: bool = False,
) -> list[dict[str, Any]]:
    """The chunk objects of an SSE stream, in order (without ``[DONE]``).

    Moonshot reports usage inside the last choice; Z.ai at the top of the last
    chunk and its web search results at the top of the first. Calls to the
    caller's tools come after the text. Moonshot sends each call's index, id and
    name with empty arguments first and then the arguments in pieces carrying
    only the index. Z.ai sends every call whole in one chunk, unless the request
    asked for ``tool_stream`` [G-6], when (3p braintrustdata/lingua#318) the
    first argument fragment comes with the id and name, every continuation
    repeats the id, and the last fragment of the last call rides on the finish
    chunk; with ``repeat_name`` (config ``glm_tool_stream_repeat_name``) every
    piece also repeats ``function.name``, as some GLM servers do (3p
    vllm#44098). Kimi's built-in ``$web_search`` call comes whole.
    """
    head = {"id": f"chatcmpl-emu-{seq}", "created": int(time.time()), "model": model}
    if vendor == "kimi":
        head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        return {**head, "choices": [choice], **extra}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if vendor == "glm" and reply.web_search:
        chunks[0]["web_search"] = reply.web_search
    chunks += [chunk({"reasoning_content": piece}) for piece in split_tokens(reply.reasoning)]
    chunks += [chunk({"content": piece}) for piece in reply.pieces]
    calls = [{"index": i, **call} for i, call in enumerate(reply.tool_calls)]
    pieces = (vendor == "kimi" or tool_stream) and all(c["type"] == "function" for c in calls)
    last = chunk({} if vendor == "kimi" else {"role": "assistant", "content": ""})
    if calls and not pieces:
        chunks.append(chunk({"tool_calls": calls}))
    elif calls and vendor == "kimi":
        chunks += [chunk({"tool_calls": [p]}) for p in _moonshot_call_pieces(calls)]
    elif calls:
        glm = _zai_call_pieces(calls, repeat_name=repeat_name)
        chunks += [chunk({"tool_calls": [p]}) for p in glm[:-1]]
        last["choices"][0]["delta"]["tool_calls"] = [glm[-1]]
    last["choices"][0]["finish_reason"] = reply.finish_reason
    if vendor == "kimi":
        last["choices"][0]["usage"] = reply.usage(vendor)
    else:
        last["usage"] = reply.usage(vendor)
    chunks.append(last)
    return chunks


def _argument_pieces(arguments: str) -> list[str]:
    return [arguments[at : at + _ARGUMENT_PIECE]
            for at in range(0, len(arguments), _ARGUMENT_PIECE)] or [""]  # fmt: skip


def _moonshot_call_pieces(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call in calls:
        function = call["function"]
        out.append({"index": call["index"], "id": call["id"], "type": call["type"],
                    "function": {"name": function["name"], "arguments": ""}})  # fmt: skip
        out += [{"index": call["index"], "function": {"arguments": piece}}
                for piece in _argument_pieces(function["arguments"]) if piece]  # fmt: skip
    return out


def _zai_call_pieces(calls: list[dict[str, Any]], *, repeat_name: bool) -> list[dict[str, Any]]:
    """Z.ai's tool_stream pieces; the caller puts the last one on the finish chunk
    (so a call of one piece has it there only when it is the last call)."""
    out: list[dict[str, Any]] = []
    for call in calls:
        name = call["function"]["name"]
        for n, piece in enumerate(_argument_pieces(call["function"]["arguments"])):
            function = (
                {"name": name, "arguments": piece}
                if n == 0 or repeat_name
                else {"arguments": piece}
            )
            item = {"index": call["index"], "id": call["id"], "function": function}
            if n == 0:
                item["type"] = call["type"]
            out.append(item)
    return out


def split_tokens(text: str) -> list[str]:
    """The emulator's tokens: each word with the whitespace after it, so that
    joining them gives the text back exactly."""
    return _TOKEN_RE.findall(text)


def sse(data: dict[str, Any] | str) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n"
