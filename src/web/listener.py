"""uvicorn's HTTP protocol with the listener's limits: connection caps and read timeouts.

uvicorn takes any connection and holds it as long as the client likes: it has
no per-address cap, and no timeout for a request's headers or body (its
keep-alive timeout runs only between requests). So 2,000 connections that
each sent a header line every 9 s were all held. :func:`protocol_for` gives
uvicorn (``Config(http=...)``) its httptools protocol with:

- the connection limits of :class:`~exai.web.connections.HttpConnections`,
  checked as the connection is made: a refused one gets its status (503 or
  429) and is closed before anything is parsed;
- a **header timeout** (``EXAI_HTTP_HEADER_TIMEOUT_S``): a request's line and
  headers must be in within it, counted from the connection's start for the
  first request and from a request's first byte for the next ones; otherwise
  the answer is 408 and the connection is closed;
- a **body timeout** (``EXAI_HTTP_BODY_TIMEOUT_S``): the whole body must follow
  its headers within it; otherwise the connection is closed, and the
  application reading the body sees the client gone.

The hooks are httptools' parser callbacks (``on_message_begin``,
``on_headers_complete``, ``on_message_complete``), which uvicorn's
``HttpToolsProtocol`` implements, and asyncio's ``connection_made``,
``data_received`` and ``connection_lost``; each calls uvicorn's own first or last.
uvicorn is pinned to the minor release this was written against, and
``tests/web/test_listener.py`` holds the seam.

A refusal or a 408 is answered with a *lingering close*, as nginx and Apache
do: the answer, then a FIN, then whatever the client still sends is read and
dropped until it closes or ``LINGER_S`` passes. Closing a socket with unread
bytes in it sends a reset, and a reset can reach the client before it has read
the answer, which it then never sees: a client that was still sending its
headers (the very case of the 408) would see "connection reset" instead of
why. Refused connections are not counted against the caps, so no more of them
linger at once than the cap on all connections; past that they are closed at once.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from exai.logs import get_logger
from exai.web.connections import HttpConnections

__all__ = ["ListenerLimits", "protocol_for"]

log = get_logger("exai.web")

# How long a connection closed with an answer keeps reading (and dropping) what
# the client still sends, so that closing it does not reset the answer away.
LINGER_S = 2.0

_REASONS = {408: "Request Timeout", 429: "Too Many Requests", 503: "Service Unavailable"}
# exai's error code for each refusal, in the body every exai face answers with.
_CODES = {408: "TIMEOUT", 429: "RATE_LIMITED", 503: "OVER_CAPACITY"}


class ListenerLimits:
    """What the protocol needs to know: the connection book and the two timeouts."""

    def __init__(self, connections: HttpConnections, header_timeout_s: float,
                 body_timeout_s: float) -> None:  # fmt: skip
        self.connections = connections
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.lingering = 0  # connections answered and closing, see LINGER_S


class _LimitedProtocol(HttpToolsProtocol):
    limits: ClassVar[ListenerLimits]

    _timer: asyncio.TimerHandle | None = None
    _lingering = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        refusal = self.limits.connections.open(self, self.client)
        if refusal is not None:
            self._answer_and_close(transport, _answer(refusal.status, refusal.message))
            return
        self._arm("headers")

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # answered and closing: what the client still sends is dropped
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._lingering:
            self.limits.lingering -= 1
        self.limits.connections.closed(self, self.client)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._timer is None:  # the first request's clock started with the connection
            self._arm("headers")

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        self._arm("body")

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    # --- the timer -------------------------------------------------------------------

    def _arm(self, phase: str) -> None:
        limits = self.limits
        delay = limits.header_timeout_s if phase == "headers" else limits.body_timeout_s
        self._timer = self.loop.call_later(delay, self._timed_out, phase)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self, phase: str) -> None:
        self._timer = None
        self.limits.connections.timed_out[phase] += 1
        log.debug("http read timed out", phase=phase, client=self.client)
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        cycle = getattr(self, "cycle", None)
        if phase == "headers" and (cycle is None or cycle.response_complete):
            # Nothing is being answered on this connection: say why it is closed.
            limit = self.limits.header_timeout_s
            self._answer_and_close(transport, _answer(408, f"the request's headers took over "
                                   f"{limit:g} s (EXAI_HTTP_HEADER_TIMEOUT_S)"))  # fmt: skip
            return
        transport.close()

    def _answer_and_close(self, transport: asyncio.Transport, answer: bytes) -> None:
        """Write ``answer`` and close after it, lingering (see the module's docstring).

        The client's own FIN ends the linger early: uvicorn's ``eof_received``
        returns None, so asyncio closes the transport then.
        """
        transport.write(answer)
        limits = self.limits
        if limits.lingering >= limits.connections.max_total or not transport.can_write_eof():
            transport.close()
            return
        limits.lingering += 1
        self._lingering = True
        transport.write_eof()
        self.loop.call_later(LINGER_S, transport.close)


def protocol_for(limits: ListenerLimits) -> type[asyncio.Protocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, bound to ``limits``."""
    return type("ExaiHttpProtocol", (_LimitedProtocol,), {"limits": limits})


def _answer(status: int, message: str) -> bytes:
    body = json.dumps({"error": {"code": _CODES.get(status, "INVALID_REQUEST"),
                                 "message": message}}).encode()  # fmt: skip
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")  # fmt: skip
    return head.encode("latin-1") + body
