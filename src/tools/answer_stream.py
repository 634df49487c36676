"""A model's answer streamed to the caller of a tool, as the caller asked for it.

A face that asked for events (the model faces, ``ToolContext.event_cb``) gets
each piece of the answer as a :class:`~exai.protocol.StreamEvent` (text,
reasoning, the start of a call of one of its tools and that call's arguments);
the usage and the whole answer are the result's. Any other caller that asked to
stream (a WebSocket client) gets the text cut into readable ``stream_chunk``
pieces (:class:`~exai.tools.chunker.StreamChunker`).
"""

from __future__ import annotations

from typing import Any, cast

from exai.errors import InternalError
from exai.protocol import StreamEvent, ToolCall
from exai.providers import ChatRequest, ChatResponse, ModelInfo
from exai.tools.base import ToolContext
from exai.tools.chunker import StreamChunker

__all__ = ["stream_answer"]


async def stream_answer(
    context: ToolContext, providers: Any, request: ChatRequest, info: ModelInfo
) -> ChatResponse:
    """Stream the answer to the caller; the whole answer, once the provider gave it."""
    s = context.settings
    chunker = StreamChunker(s.stream_min_chunk_chars, s.stream_max_chunk_chars)
    events = context.event_cb is not None
    response: ChatResponse | None = None
    async for delta in providers.stream(request, info):
        if delta.kind == "done":
            response = delta.response
        elif events:
            if delta.kind != "usage":  # the result carries the usage
                call = cast(ToolCall | None, delta.tool_call)
                await context.event(StreamEvent(delta.kind, delta.text, delta.index, call))
        elif delta.kind == "text" and delta.text:
            for chunk in chunker.feed(delta.text):
                await context.stream(chunk)
    for chunk in chunker.flush():
        await context.stream(chunk)
    if response is None:
        raise InternalError(f"{info.provider} ended its stream without a final response")
    return response
