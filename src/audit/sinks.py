"""Where shipped events go: the sink contract and its two failures.

A sink takes a batch of events and either accepts all of it or raises:

- :class:`SinkUnavailable`: the batch may succeed later (network down, 5xx,
  timeout, auth misconfigured). The shipper keeps it and retries with backoff.
- :class:`SinkRejected`: the batch will never be accepted as it is (a 4xx such
  as a schema mismatch). The shipper quarantines it and moves on.

Sinks insert idempotently on ``event_id``, so a batch sent twice (a crash after
the sink accepted it and before the outbox forgot it) is stored once.
``EXAI_AUDIT_SINK=none`` uses :class:`LocalOnlySink`: events are "delivered" to
the outbox's own archive, which is a bounded ring, so the trail stays local and
the file never grows past its limits. Which sink ``EXAI_AUDIT_SINK`` names is
decided in :mod:`exai.audit.named_sink`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from exai.redact import mask_url_credentials

__all__ = [
    "LocalOnlySink",
    "Sink",
    "SinkError",
    "SinkRejected",
    "SinkUnavailable",
    "is_permanent_http_status",
]


class SinkError(Exception):
    """A batch was not accepted.

    The message usually quotes the HTTP or database client's exception, which
    may name the sink's URL with its credentials; it is kept in the outbox and
    shown by ``exai audit``, ``/ready`` and the log, so they are masked here.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(mask_url_credentials(message))


class SinkUnavailable(SinkError):
    """Not accepted now; the same batch may be accepted later."""


class SinkRejected(SinkError):
    """Never acceptable as sent; retrying cannot help."""


@runtime_checkable
class Sink(Protocol):
    """A destination for audit events. ``send`` is never called concurrently."""

    name: str

    async def open(self) -> None: ...

    async def send(self, events: Sequence[dict[str, Any]]) -> None: ...

    async def close(self) -> None: ...


class LocalOnlySink:
    """Accepts every batch: with no remote sink the archive is the trail."""

    name = "none"

    async def open(self) -> None:
        return None

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        return None

    async def close(self) -> None:
        return None


_RETRYABLE_4XX = frozenset({401, 403, 408, 425, 429})


def is_permanent_http_status(status: int) -> bool:
    """True for a 4xx that another attempt cannot fix.

    Auth failures (401/403) are treated as retryable: they are a property of
    the deployment, not of the batch, and quarantining the whole trail while a
    key is rotated would be worse than waiting. Timeouts and rate limits
    (408, 425, 429) are transient by definition.
    """
    return 400 <= status < 500 and status not in _RETRYABLE_4XX
