"""Server-sent events, and the one loop that streams a running call as them.

Every face that streams a call's answer to an HTTP client (the model faces'
``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses``, the console's
reply) runs :func:`relay`: it hands what the call produces to the face as it
arrives, sends a keep-alive when the call has been quiet for ``ping_s`` seconds
(so no proxy's idle timeout cuts a long call), and cancels the call when the
client goes away. What the face makes of each piece is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from exai.web.asgi import Receive, disconnected

__all__ = ["PING", "relay", "sse", "sse_event"]

T = TypeVar("T")
E = TypeVar("E")

# An SSE comment, which every client skips: the keep-alive of a stream whose API has
# no ping event of its own.
PING = b": ping\n\n"


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event with only ``data``; a string (``[DONE]``) goes as it is."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


def sse_event(name: str, data: dict[str, Any]) -> bytes:
    """One server-sent event named ``name``."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def relay(
    call: Awaitable[T],
    pieces: asyncio.Queue[E],
    receive: Receive,
    *,
    deliver: Callable[[list[E]], Awaitable[None]],
    ping: Callable[[], Awaitable[None]],
    ping_s: float,
) -> T | None:
    """Run ``call``, handing ``deliver`` what it puts into ``pieces`` as it arrives (every
    piece that came meanwhile in one batch, so one write), and ``ping`` when nothing came
    for ``ping_s`` seconds. The call's result, once everything it put in was delivered;
    None if the client left first, which cancels the call."""
    task = asyncio.ensure_future(call)
    gone = asyncio.ensure_future(disconnected(receive))
    try:
        while True:
            waiting = asyncio.ensure_future(pieces.get())
            done, _ = await asyncio.wait(
                {waiting, task, gone}, timeout=ping_s, return_when=asyncio.FIRST_COMPLETED
            )
            if gone.done():
                waiting.cancel()
                return None
            if not done:  # quiet for ping_s: keep the connection alive
                waiting.cancel()
                await ping()
                continue
            if not waiting.done():
                waiting.cancel()
                break
            await deliver([waiting.result(), *_drain(pieces)])
        rest = _drain(pieces)
        if rest:
            await deliver(rest)
        return task.result()
    finally:
        gone.cancel()
        if not task.done():  # the client left: cancelling the call's task cancels the call
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _drain(pieces: asyncio.Queue[E]) -> list[E]:
    return [pieces.get_nowait() for _ in range(pieces.qsize())]
