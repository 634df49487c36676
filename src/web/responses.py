"""The OpenAI Responses API at ``/v1/responses``: the I/O edge.

Codex (a model provider with ``wire_api = "responses"`` and ``base_url`` at
exai's ``/v1``) and the OpenAI Agents SDK's default model run on Kimi or GLM
through it (docs/agents.md). Each request is one ``completion`` call through the
core's port (:mod:`exai.web.model_stream` runs it, whole or streamed):
:mod:`exai.web.responses_request` says which call, :mod:`exai.web.responses_response`
shapes its answer, and errors have OpenAI's shape (:mod:`exai.web.openai_errors`).
A response kept with ``store`` is continued by ``previous_response_id`` from the
conversation store, for its owner only.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from starlette.routing import BaseRoute, Route

from exai.port import Caller, Port
from exai.web.asgi import Receive, Send, headers_of, read_json, send_json
from exai.web.guard import principal_of
from exai.web.model_call import RequestRefused
from exai.web.model_stream import face_span, result_text, run_streamed, run_whole
from exai.web.openai_errors import error_response, refusal_response
from exai.web.responses_request import ResponsesCall, parse_responses
from exai.web.responses_response import ResponseStream, response_body

__all__ = ["routes"]


def routes(core: Port) -> list[BaseRoute]:
    return [Route("/v1/responses", _Responses(core), methods=["POST"])]


class _Responses:
    """``POST /v1/responses`` as a plain ASGI app, so it can watch for the client leaving."""

    def __init__(self, core: Port) -> None:
        self.core = core

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        try:
            body = await read_json(receive, headers, self.core.settings.max_frame_bytes)
            if body is None:
                return  # the client left before it finished sending
            call = parse_responses(body, f"resp_{secrets.token_hex(16)}")
        except RequestRefused as exc:
            await send_json(send, *refusal_response(exc))
            return
        client = self.core.connect(principal_of(scope))
        try:
            with face_span(call, client, headers, "/v1/responses"):
                await self._answer(call, client, receive, send)
        finally:
            client.close()

    async def _answer(
        self, call: ResponsesCall, client: Caller, receive: Receive, send: Send
    ) -> None:
        created = int(time.time())
        if call.stream:
            stream = ResponseStream(call, created=created)
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
        await send_json(send, 200, response_body(call, result, result_text(result), created))
