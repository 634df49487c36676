"""websockets' own log lines, written by the daemon's logger.

:class:`WebsocketsLog` is what the server passes websockets as ``logger``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from websockets.exceptions import InvalidHandshake

from exai.logs import get_logger

__all__ = ["WebsocketsLog"]


class WebsocketsLog(logging.LoggerAdapter[logging.Logger]):
    """websockets' log lines (``serve(logger=...)``), written by the daemon's logger.

    Left to itself, websockets writes through Python's last-resort handler, as
    plain text: "opening handshake failed" at error level with three chained
    tracebacks whenever a client leaves before completing an upgrade request or
    sends one that is not valid (a port probe, a load balancer's TCP check, or
    anyone with a socket, as often as they like). That is the client's doing (an
    invalid request is answered with 400; one that was cut short has nobody to
    tell): one debug line naming the cause. Anything else at warning level or
    above is logged as it is, traceback included; below that, nothing.
    """

    def __init__(self) -> None:
        super().__init__(logging.getLogger("websockets.server"), {})
        self._into = get_logger("exai.websockets")

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level < logging.WARNING:
            return
        text = str(msg) % args if args else str(msg)
        exc = sys.exc_info()[1] if kwargs.get("exc_info") else None
        if isinstance(exc, InvalidHandshake):
            self._into.debug(text, error=_causes(exc))
        elif level >= logging.ERROR:
            self._into.error(text, exc_info=exc is not None)
        else:
            self._into.warning(text)


def _causes(exc: BaseException) -> str:
    """``exc`` and what caused it, one line: "did not receive a valid HTTP request; ..."."""
    parts: list[str] = []
    cause: BaseException | None = exc
    while cause is not None and len(parts) < 4:
        parts.append(str(cause) or type(cause).__name__)
        cause = cause.__cause__
    return "; ".join(parts)
