"""The Anthropic Messages API at ``/v1/messages``: the I/O edge.

``ANTHROPIC_BASE_URL=http://127.0.0.1:8078`` with an exai token as
``ANTHROPIC_API_KEY`` (sent as ``x-api-key``) or ``ANTHROPIC_AUTH_TOKEN`` (sent as
``Authorization: Bearer``) puts Claude Code on Kimi or GLM (docs/agents.md).
Each request is one ``completion`` call through the core's port
(:mod:`exai.web.model_stream` runs it, whole or streamed):
:mod:`exai.web.anthropic_request` says which call, :mod:`exai.web.anthropic_response`
and :mod:`exai.web.anthropic_errors` shape its answer.

``/v1/messages/count_tokens`` answers from exai's token estimate for the model
the request would be served by, without a call to the model.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.routing import BaseRoute, Route

from exai.port import Caller, Port
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
from exai.web.model_call import RequestRefused
from exai.web.model_stream import face_span, result_text, run_streamed, run_whole

__all__ = ["routes"]


def routes(core: Port) -> list[BaseRoute]:
    return [
        Route("/v1/messages", _Messages(core), methods=["POST"]),
        Route("/v1/messages/count_tokens", _CountTokens(core), methods=["POST"]),
    ]


class _Messages:
    """``POST /v1/messages`` as a plain ASGI app, so it can watch for the client leaving."""

    def __init__(self, core: Port) -> None:
        self.core = core
        self.rules = model_rules(core.settings.anthropic_models)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        try:
            body = await read_json(receive, headers, self.core.settings.max_frame_bytes)
            if body is None:
                return  # the client left before it finished sending
            call = parse_messages(body, self.rules)
        except RequestRefused as exc:
            await send_json(send, *refusal_response(exc))
            return
        client = self.core.connect(principal_of(scope))
        try:
            with face_span(call, client, headers, "/v1/messages"):
                await self._answer(call, client, receive, send)
        finally:
            client.close()

    async def _answer(
        self, call: MessagesCall, client: Caller, receive: Receive, send: Send
    ) -> None:
        message_id = f"msg_{secrets.token_hex(12)}"
        if call.stream:
            stream = MessageStream(call, message_id=message_id)
            await run_streamed(
                self.core,
                client,
                call,
                receive,
                send,
                stream,
                error_response,
                ping_s=self.core.settings.faces_ping_s,
            )
            return
        result = await run_whole(self.core, client, call, receive)
        if result is None:
            return
        if result.error is not None:
            await send_json(send, *error_response(result.error))
            return
        body = message_body(call, result, result_text(result), message_id=message_id)
        await send_json(send, 200, body)


class _CountTokens:
    """``POST /v1/messages/count_tokens``: exai's estimate of the prompt's tokens."""

    def __init__(self, core: Port) -> None:
        self.core = core
        self.rules = model_rules(core.settings.anthropic_models)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        try:
            body = await read_json(receive, headers, self.core.settings.max_frame_bytes)
            if body is None:
                return
            arguments = parse_count_tokens(body, self.rules)
        except RequestRefused as exc:
            await send_json(send, *refusal_response(exc))
            return
        counted = self.core.reads.count_tokens(
            arguments["model"], arguments["messages"], arguments.get("tools") or []
        )
        await send_json(send, 200, {"input_tokens": counted})
