"""The WebSocket face's open connections, counted per address and in all.

:class:`OpenConnections` is what the upgrade hook (:mod:`exai.ws.http`) asks
before it lets a connection in, what each connection's handler
(:mod:`exai.ws.connection`) reports to as it opens and closes, and what the
face (:mod:`exai.ws.server`) closes on shutdown.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from exai.port import Port

__all__ = ["OpenConnections"]


class OpenConnections:
    def __init__(self, core: Port) -> None:
        self.core = core
        self.settings = core.settings
        self.connections: set[Any] = set()  # websockets ServerConnections
        self.per_ip: Counter[str] = Counter()
        self.closing = False  # the face takes no new connection

    def opened(self, ws: Any, peer: str) -> None:
        self.connections.add(ws)
        self.per_ip[peer] += 1
        self.core.metrics.connections_total.inc()

    def closed(self, ws: Any, peer: str) -> None:
        self.connections.discard(ws)
        self.per_ip[peer] -= 1
        if self.per_ip[peer] <= 0:
            del self.per_ip[peer]

    def at_limit(self, peer: str) -> str | None:
        """Why a new connection from ``peer`` is refused, or None if it may open."""
        s = self.settings
        if self.closing or self.core.draining:
            return "the daemon is shutting down"
        if len(self.connections) >= s.max_connections:
            return f"too many connections ({s.max_connections})"
        if self.per_ip[peer] >= s.max_connections_per_ip:
            return f"too many connections from {peer} ({s.max_connections_per_ip})"
        return None
