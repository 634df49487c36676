"""The HTTP listener's connections: how many, from where, and which have logged in.

The WebSocket face's limits, applied to the HTTP listener's own connections:

- at most ``max_total`` open at once, and ``max_per_address`` from one address
  (an IPv6 /64 counts as one, as :func:`exai.admission.address_key` says):
  beyond either the connection is refused with 503;
- until a request on it has passed the guard's token check, a connection counts
  against its address's allowance of connections not logged in, the one
  :class:`~exai.admission.Admission` the WebSocket face uses too (so an
  address's silent HTTP and WebSocket connections share it): beyond it, 429.

No I/O: the listener's protocol (:mod:`exai.web.listener`) calls :meth:`open`
and :meth:`closed`; the guard calls :meth:`logged_in` with the request's client
address, which names the connection it came on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exai.admission import Admission, address_key

__all__ = ["HttpConnections", "Refusal"]


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int  # 503 at a connection cap, 429 at the not-logged-in allowance
    message: str


class HttpConnections:
    def __init__(self, admission: Admission, *, max_total: int, max_per_address: int) -> None:
        self.admission = admission
        self.max_total = max_total
        self.max_per_address = max_per_address
        self._address: dict[Any, str] = {}  # connection -> its address key
        self._per_address: Counter[str] = Counter()
        # Keyed as the ASGI scope's "client" names a connection: (host, port).
        self._by_client: dict[tuple[Any, ...], Any] = {}
        self.refused: Counter[str] = Counter()  # "capacity" | "unauthenticated"
        self.timed_out: Counter[str] = Counter()  # "headers" | "body"

    def open(self, connection: Any, client: tuple[str, int] | None) -> Refusal | None:
        """Count a new connection from ``client`` (host, port); or say why it is refused."""
        host = client[0] if client else "?"
        key = address_key(host)
        if len(self._address) >= self.max_total:
            self.refused["capacity"] += 1
            return Refusal(503, f"too many HTTP connections ({self.max_total})")
        if self._per_address[key] >= self.max_per_address:
            self.refused["capacity"] += 1
            return Refusal(503, f"too many HTTP connections from {host} "
                                f"({self.max_per_address})")  # fmt: skip
        refusal = self.admission.admit(connection, host)
        if refusal is not None:
            self.refused["unauthenticated"] += 1
            return Refusal(429, refusal)
        self._address[connection] = key
        self._per_address[key] += 1
        if client is not None:
            self._by_client[tuple(client)] = connection
        return None

    def logged_in(self, client: Sequence[Any] | None) -> None:
        """A request from ``client`` passed the token check: its connection no longer
        counts as not logged in."""
        connection = self._by_client.get(tuple(client)) if client else None
        if connection is not None:
            self.admission.release(connection)

    def closed(self, connection: Any, client: tuple[str, int] | None) -> None:
        """The connection ended; calling it again, or for a refused one, does nothing."""
        self.admission.release(connection)
        key = self._address.pop(connection, None)
        if key is None:
            return
        if client is not None and self._by_client.get(tuple(client)) is connection:
            del self._by_client[tuple(client)]
        self._per_address[key] -= 1
        if self._per_address[key] <= 0:
            del self._per_address[key]

    def __len__(self) -> int:
        return len(self._address)
