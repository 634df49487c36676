"""The Anthropic Messages API at ``/v1/messages``: the I/O edge.

``ANTHROPIC_BASE_URL=http://127.0.0.1:8078`` with an exai token as
``ANTHROPIC_API_KEY`` (sent as ``x-api-key``) or ``ANTHROPIC_AUTH_TOKEN`` (sent as
``Authorization: Bearer``) puts Claude Code on Kimi or GLM (docs/agents.md).
Each request is one ``completion`` call through the core's port
(:mod:`exai.web.model_stream` runs it, whole or streamed):
:mod:`exai.web.anthropic_request` says which call, :mod:`exai.web.anthropic_response`
and :mod:`exai.web.anthropic_errors` shape its answer.

``/v1/messages/count_tokens`` answers from exai's token estimate for the model
the request would be served by, without a call to the model, to a principal
whose scopes let it make that call (a token that may not call ``completion``
is refused here as on ``/v1/messages``, with the dispatcher's words).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from starlette.routing import BaseRoute, Route

from exai.errors import ForbiddenError
from exai.port import Caller, Port
from exai.protocol import CallToolResult
from exai.web.anthropic_errors import error_response, refusal_response
from exai.web.anthropic_request import (
    MessagesCall,
    model_rules,
    parse_count_tokens,
    parse_messages,
)
from exai.web.anthropic_response import MessageStream, message_body
from exai.web.asgi import Receive, Send, headers_of, read_json, send_json
from exai.web.guard import principal_of
from exai.web.model_call import TOOL, RequestRefused
from exai.web.model_face import ModelFace, Whole
from exai.web.model_stream import result_text
from exai.web.reasoning_seal import ReasoningSeal, face_seal

__all__ = ["routes"]


def routes(core: Port) -> list[BaseRoute]:
    seal = face_seal(core.settings)
    return [
        Route("/v1/messages", ModelFace(core, _Messages(core, seal)), methods=["POST"]),
        Route("/v1/messages/count_tokens", _CountTokens(core, seal), methods=["POST"]),
    ]


class _Messages:
    """``POST /v1/messages``: the Anthropic Messages API over the shared model face."""

    path = "/v1/messages"
    error_response = staticmethod(error_response)
    refusal_response = staticmethod(refusal_response)

    def __init__(self, core: Port, seal: ReasoningSeal) -> None:
        self.rules = model_rules(core.settings.anthropic_models)
        self.seal = seal

    def parse(self, body: Any, headers: Mapping[str, str], principal: str) -> MessagesCall:
        return parse_messages(body, self.rules, self.seal.for_principal(principal))

    def stream(self, call: MessagesCall) -> tuple[MessageStream, list[tuple[bytes, bytes]]]:
        return MessageStream(call, message_id=_message_id()), []

    async def whole(self, call: MessagesCall, result: CallToolResult, client: Caller) -> Whole:
        return 200, message_body(call, result, result_text(result), message_id=_message_id()), {}


class _CountTokens:
    """``POST /v1/messages/count_tokens``: exai's estimate of the prompt's tokens."""

    def __init__(self, core: Port, seal: ReasoningSeal) -> None:
        self.core = core
        self.rules = model_rules(core.settings.anthropic_models)
        self.seal = seal

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        try:
            body = await read_json(receive, headers, self.core.settings.max_frame_bytes)
            if body is None:
                return
            carriers = self.seal.for_principal(principal_of(scope).name)
            arguments = parse_count_tokens(body, self.rules, carriers)
        except RequestRefused as exc:
            await send_json(send, *refusal_response(exc))
            return
        principal = principal_of(scope)
        if not principal.may_call(TOOL):
            refused = ForbiddenError(f"principal {principal.name!r} may not call {TOOL!r}")
            await send_json(send, *error_response(refused.info()))
            return
        counted = self.core.reads.count_tokens(
            arguments["model"], arguments["messages"], arguments.get("tools") or []
        )
        await send_json(send, 200, {"input_tokens": counted})


def _message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"
