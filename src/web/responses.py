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
from collections.abc import Mapping
from typing import Any

from starlette.routing import BaseRoute, Route

from exai.port import Caller, Port
from exai.protocol import CallToolResult
from exai.web.model_face import ModelFace, Whole
from exai.web.model_stream import result_text
from exai.web.openai_errors import refusal_response, responses_error_response
from exai.web.reasoning_seal import ReasoningSeal, face_seal
from exai.web.responses_request import ResponsesCall, parse_responses
from exai.web.responses_response import ResponseStream, response_body

__all__ = ["routes"]


def routes(core: Port) -> list[BaseRoute]:
    return [Route("/v1/responses", ModelFace(core, _Responses(face_seal(core.settings))),
                  methods=["POST"])]  # fmt: skip


class _Responses:
    """``POST /v1/responses``: the OpenAI Responses API over the shared model face."""

    path = "/v1/responses"
    error_response = staticmethod(responses_error_response)
    refusal_response = staticmethod(refusal_response)

    def __init__(self, seal: ReasoningSeal) -> None:
        self.seal = seal

    def parse(self, body: Any, headers: Mapping[str, str], principal: str) -> ResponsesCall:
        carriers = self.seal.for_principal(principal)
        return parse_responses(body, f"resp_{secrets.token_hex(16)}", carriers)

    def stream(self, call: ResponsesCall) -> tuple[ResponseStream, list[tuple[bytes, bytes]]]:
        return ResponseStream(call, created=int(time.time())), []

    async def whole(self, call: ResponsesCall, result: CallToolResult, client: Caller) -> Whole:
        return 200, response_body(call, result, result_text(result), int(time.time())), {}
