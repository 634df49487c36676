"""OpenAI-compatible ``/v1/models`` and ``/v1/chat/completions``: the I/O edge.

Any OpenAI client (the ``openai`` SDK, Aider, Continue, Cline) pointed at
``http://<daemon>:8078/v1`` with an exai token as its API key gets exai's model
routing, fallback, limits and audit trail, and, when it names a thread,
exai's conversation store (docs/openai.md). Each request is one tool call
through the core's port, made by a :class:`~exai.port.Caller` for the
principal the :class:`~exai.web.guard.Guard` authenticated, so scopes, rate
limits, deadlines and audit are the same as over WebSocket:
:mod:`exai.web.openai_request` says which call, :mod:`exai.web.openai_response`
and :mod:`exai.web.openai_errors` shape its answer.

A streamed answer starts only when the call produces its first text, so a call
that fails before (a bad argument, an unknown thread, a provider that is down)
gets its own HTTP status rather than an error inside a 200 stream. A client
that goes away, streaming or not, cancels its call.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from exai.port import Caller, Port
from exai.protocol import CallToolResult, ModelAnswer
from exai.web.guard import principal_of
from exai.web.model_call import RequestRefused
from exai.web.model_face import ModelFace, Whole
from exai.web.model_stream import result_text
from exai.web.openai_errors import error_response, refusal_response
from exai.web.openai_request import NEW_THREAD, THREAD_HEADER, CompletionCall, parse_request
from exai.web.openai_response import ChunkWriter, completion_body, model_list

__all__ = ["routes"]


def routes(core: Port) -> list[BaseRoute]:
    face = _Models(core)
    return [
        Route("/v1/models", face.list, methods=["GET"]),
        Route("/v1/models/{name:path}", face.one, methods=["GET"]),
        Route("/v1/chat/completions", ModelFace(core, _ChatCompletions(core)), methods=["POST"]),
        Route("/v1/{rest:path}", _unknown_path,
              methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]  # fmt: skip


class _Models:
    def __init__(self, core: Port) -> None:
        self.core = core

    def _listing(self, request: Request) -> dict[str, Any]:
        models = self.core.reads.models(principal_of(request.scope))  # only its own models
        return model_list(models["models"], models["auto"])

    async def list(self, request: Request) -> Response:
        return JSONResponse(self._listing(request))

    async def one(self, request: Request) -> Response:
        name = request.path_params["name"]
        for model in self._listing(request)["data"]:
            if model["id"].lower() == name.lower():
                return JSONResponse(model)
        error = RequestRefused(f"the model {name!r} does not exist on this exai daemon",
                               param="model", code="model_not_found", status=404)  # fmt: skip
        status, body, headers = refusal_response(error)
        return JSONResponse(body, status_code=status, headers=headers)


async def _unknown_path(request: Request) -> Response:
    error = RequestRefused(
        "exai serves GET /v1/models, POST /v1/chat/completions, POST /v1/responses, "
        "POST /v1/messages and POST /v1/messages/count_tokens, not "
        f"{request.method} {request.url.path}",
        code="unknown_url",
        status=404,
    )
    status, body, headers = refusal_response(error)
    return JSONResponse(body, status_code=status, headers=headers)


class _ChatCompletions:
    """``POST /v1/chat/completions``: OpenAI chat completions over the shared model face."""

    path = "/v1/chat/completions"
    error_response = staticmethod(error_response)
    refusal_response = staticmethod(refusal_response)

    def __init__(self, core: Port) -> None:
        self.core = core

    def parse(self, body: Any, headers: Mapping[str, str], principal: str) -> CompletionCall:
        return parse_request(body, headers)

    def stream(self, call: CompletionCall) -> tuple[ChunkWriter, list[tuple[bytes, bytes]]]:
        writer = ChunkWriter(call, completion_id=_completion_id(), created=int(time.time()))
        headers = []
        if call.thread is not None and call.thread != NEW_THREAD:
            headers.append((THREAD_HEADER.encode(), call.thread.encode()))
        return writer, headers

    async def whole(self, call: CompletionCall, result: CallToolResult, client: Caller) -> Whole:
        text = await self._whole_text(result, client)
        body = completion_body(call, result, text, completion_id=_completion_id(),
                               created=int(time.time()))  # fmt: skip
        thread = result.metadata.continuation_id if call.thread is not None else None
        return 200, body, {THREAD_HEADER: thread} if thread else {}

    async def _whole_text(self, result: CallToolResult, client: Caller) -> str:
        """The answer whole: one too large for an MCP client was stored as an
        artifact of its thread (exai.tools.artifacts), and an OpenAI client takes it all."""
        artifact = ModelAnswer.of(result.metadata).artifact_id
        thread = result.metadata.continuation_id
        if not artifact or not thread:
            return result_text(result)
        whole = await self.core.reads.artifact_text(thread, artifact, client.principal.name)
        # Unreadable: the beginning and the note saying where the rest is, then.
        return whole if whole is not None else result_text(result)


def _completion_id() -> str:
    return f"chatcmpl-{secrets.token_hex(12)}"
