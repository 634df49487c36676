"""What an address may do before it has logged in: open connections, fail logins.

Until a connection's ``hello`` succeeds the daemon knows nothing about it but
its address, so that is what these limits count:

* **Connections not yet logged in**: from the WebSocket upgrade to a successful
  ``hello``, or from an HTTP connection's start to its first request that passes
  the token check (or the end of the connection), at most ``max_unauthenticated``
  per address, over both listeners together. A WebSocket one may send at most
  ``EXAI_HELLO_MAX_BYTES`` (see
  :meth:`exai.ws.transport.ExaiConnection.allow_messages_up_to`) and an HTTP one
  has its read timeouts (:mod:`exai.web.listener`), so together they bound what
  an address can hold without a credential.
* **Failed logins**: a token bucket per address, refilling ``failures_per_min``
  up to ``failures_burst``. While an address's bucket is empty its hellos are
  refused without looking at the token, so guessing proceeds at the refill
  rate, and a correct guess is not recognised either until the bucket refills.

IPv6 addresses count by their /64, the block one host is usually given, so
a host cannot step around the limits by moving inside it. Loopback is not
exempt: a web page in a local browser, or another user of the machine, reaches
loopback as easily as an IDE does.

No I/O: the faces call these from the WebSocket upgrade hook and handshake, and
from the HTTP listener's connections and guard.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from typing import Any

from exai.limits import TokenBucket

__all__ = ["Admission", "address_key"]


def address_key(peer: str) -> str:
    """The unit the limits count: an IPv4 address, or an IPv6 address's /64."""
    try:
        ip = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return peer  # not an IP address (a Unix socket path): counted as itself
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class Admission:
    def __init__(
        self, max_unauthenticated: int, failures_per_min: float, failures_burst: int
    ) -> None:
        self.max_unauthenticated = max_unauthenticated
        self._rate = failures_per_min / 60.0
        self._burst = failures_burst
        self._waiting: dict[Any, str] = {}  # connection -> its address key
        self._per_address: Counter[str] = Counter()
        self._failures: dict[str, TokenBucket] = {}
        self._throttled: set[str] = set()  # used up their allowance since it was last full

    # --- connections not yet logged in ---------------------------------------------

    def admit(self, connection: Any, peer: str) -> str | None:
        """Count ``connection`` as not logged in yet; or say why it is refused."""
        key = address_key(peer)
        if self._per_address[key] >= self.max_unauthenticated:
            return (
                f"too many connections from {peer} that have not said hello "
                f"({self.max_unauthenticated})"
            )
        self._waiting[connection] = key
        self._per_address[key] += 1
        return None

    def release(self, connection: Any) -> None:
        """``connection`` logged in or ended; calling it again does nothing."""
        key = self._waiting.pop(connection, None)
        if key is None:
            return
        self._per_address[key] -= 1
        if self._per_address[key] <= 0:
            del self._per_address[key]

    @property
    def unauthenticated(self) -> int:
        return len(self._waiting)

    # --- failed logins -------------------------------------------------------------

    def login_wait_s(self, peer: str) -> float:
        """Seconds before ``peer`` may try to log in again; 0.0 when it may now."""
        if self._rate <= 0:
            return 0.0
        bucket = self._failures.get(address_key(peer))
        return bucket.wait_s() if bucket is not None else 0.0

    def login_failed(self, peer: str) -> bool:
        """Count a failed login; True when it starts throttling the address: it used
        up an allowance that has not run out since it was last full."""
        if self._rate <= 0:
            return False
        key = address_key(peer)
        bucket = self._failures.get(key)
        if bucket is None:
            bucket = self._failures[key] = TokenBucket(self._rate, self._burst)
        bucket.spend()
        if bucket.wait_s() > 0 and key not in self._throttled:
            self._throttled.add(key)
            return True
        return False

    def sweep(self) -> None:
        """Forget addresses whose allowance has refilled, so the table stays small."""
        for key in [k for k, bucket in self._failures.items() if bucket.full]:
            del self._failures[key]
            self._throttled.discard(key)
