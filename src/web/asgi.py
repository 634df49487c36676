"""Small ASGI helpers every HTTP face shares: headers, bodies, JSON answers, disconnects.

The faces on the HTTP listener are plain ASGI apps where they must watch the
client while a call runs (a client that goes away cancels its call), which a
request/response endpoint cannot do. These are the pieces each of them needs,
written once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic_core import from_json

from exai.protocol.codec import check_finite
from exai.web.model_call import RequestRefused

__all__ = [
    "BodyTooLarge",
    "Receive",
    "Send",
    "disconnected",
    "headers_of",
    "parse_json",
    "read_body",
    "read_json",
    "send_json",
    "unless_client_leaves",
]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
T = TypeVar("T")


class BodyTooLarge(Exception):
    """The request body is over the face's limit."""


def headers_of(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers, names in lower case (the last of repeated names wins)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes | None:
    """The whole request body; None if the client disconnected while sending it.

    Raises :class:`BodyTooLarge` as soon as the declared or received size passes
    ``limit``, before the rest is read.
    """
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """A request body as JSON, parsed as the WebSocket face parses a frame
    (pydantic-core's parser, :func:`exai.protocol.parse_client_frame`).

    So what no call could serve is refused here, with a :class:`ValueError` naming
    it: nesting past the parser's depth bound (``json`` recurses until a
    RecursionError) and a lone surrogate escape (``"\\ud800"``, which ``json``
    accepts and no provider request can encode).
    """
    try:
        value = from_json(body)
    except ValueError as exc:
        message = str(exc)
        if "hex escape" in message:  # pydantic-core's words for a surrogate left alone
            message += " (\\ud800-\\udfff escapes come only in surrogate pairs)"
        raise ValueError(message) from None
    check_finite(body, value)
    return value


async def read_json(receive: Receive, headers: dict[str, str], limit: int) -> Any:
    """The request body as JSON; None if the client disconnected while sending it.

    A body over ``limit`` bytes or not JSON is refused (:class:`RequestRefused`).
    """
    try:
        body = await read_body(receive, headers, limit)
    except BodyTooLarge:
        raise RequestRefused(
            f"the request body is over {limit:,} bytes (EXAI_MAX_FRAME_BYTES)",
            code="request_too_large",
            status=413,
        ) from None
    if body is None:
        return None
    try:
        value = parse_json(body)
    except ValueError as exc:
        raise RequestRefused(f"the request body is not valid JSON: {exc}") from None
    if value is None:  # None is how a client that left is told apart
        raise RequestRefused("the request body is JSON null; send an object")
    return value


async def send_json(
    send: Send, status: int, body: Any, headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(body, ensure_ascii=False).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    head += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


async def disconnected(receive: Receive) -> None:
    """Return when the client disconnects (its body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_client_leaves(call: Awaitable[T], receive: Receive) -> T | None:
    """``call``'s outcome, or None (and the call cancelled) if the client leaves first."""
    task = asyncio.ensure_future(call)
    gone = asyncio.ensure_future(disconnected(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None
