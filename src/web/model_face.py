"""One model API's POST endpoint, written once for every model face.

A model face's request always goes the same way: the body is read (bounded by
``EXAI_MAX_FRAME_BYTES``) and parsed by the API's pure mapping into a
:class:`~exai.web.model_call.ModelCall`, or refused in the API's error shape;
the call runs as the principal the guard authenticated, inside the face's
span; and it is answered streamed (:func:`~exai.web.model_stream.run_streamed`,
with the API's event encoder) or whole (the API's body, or its error shape).
:class:`ModelFace` is that sequence as a plain ASGI app, so it can watch for the
client leaving; each API (:mod:`exai.web.openai`, :mod:`exai.web.anthropic`,
:mod:`exai.web.responses`) supplies only its :class:`ModelApi`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from exai.port import Caller, Port
from exai.protocol import CallToolResult, ErrorInfo
from exai.web.asgi import Receive, Send, headers_of, read_json, send_json
from exai.web.guard import principal_of
from exai.web.model_call import ModelCall, RequestRefused, client_name, with_session
from exai.web.model_stream import StreamEncoder, face_span, run_streamed, run_whole

__all__ = ["ModelApi", "ModelFace", "Whole"]

# An HTTP answer: status, body, headers.
Whole = tuple[int, Any, dict[str, str]]


class ModelApi(Protocol):
    """What one API adds to the shared sequence: its mapping, its shapes, its errors."""

    path: str

    def error_response(self, info: ErrorInfo) -> Whole:
        """The API's answer to a call that failed."""
        ...

    def refusal_response(self, refused: RequestRefused) -> Whole:
        """The API's answer to a request refused before any call."""
        ...

    def parse(self, body: Any, headers: Mapping[str, str], principal: str) -> ModelCall:
        """The call for a request; raises :class:`RequestRefused` naming what it refuses."""
        ...

    def stream(self, call: Any) -> tuple[StreamEncoder, list[tuple[bytes, bytes]]]:
        """The event encoder of a streamed answer, and extra response headers."""
        ...

    async def whole(self, call: Any, result: CallToolResult, client: Caller) -> Whole:
        """The body of a whole answer to a call that succeeded."""
        ...


class ModelFace:
    def __init__(self, core: Port, api: ModelApi) -> None:
        self.core = core
        self.api = api

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        api, core = self.api, self.core
        headers = headers_of(scope)
        try:
            body = await read_json(receive, headers, core.settings.max_frame_bytes)
            if body is None:
                return  # the client left before it finished sending
            principal = principal_of(scope)
            call = with_session(api.parse(body, headers, principal.name), headers, principal,
                                core.settings.faces_sessions)  # fmt: skip
        except RequestRefused as exc:
            await send_json(send, *api.refusal_response(exc))
            return
        client = core.connect(principal_of(scope), face=call.face, client=client_name(headers))
        try:
            with face_span(call, client, headers, api.path):
                await self._answer(call, client, receive, send)
        finally:
            client.close()

    async def _answer(self, call: ModelCall, client: Caller, receive: Receive, send: Send) -> None:
        api, core = self.api, self.core
        if call.stream:
            encoder, extra = api.stream(call)
            await run_streamed(core, client, call, receive, send, encoder, api.error_response,
                               ping_s=core.settings.faces_ping_s, headers=extra)  # fmt: skip
            return
        result = await run_whole(core, client, call, receive)
        if result is None:
            return  # the client left; its call was cancelled
        if result.error is not None:
            await send_json(send, *api.error_response(result.error))
            return
        await send_json(send, *await api.whole(call, result, client))
