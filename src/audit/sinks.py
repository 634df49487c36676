"""Where shipped events go: the sink contract, its two failures, and the factory.

A sink takes a batch of events and either accepts all of it or raises:

- :class:`SinkUnavailable`: the batch may succeed later (network down, 5xx,
  timeout, auth misconfigured). The shipper keeps it and retries with backoff.
- :class:`SinkRejected`: the batch will never be accepted as it is (a 4xx such
  as a schema mismatch). The shipper quarantines it and moves on.

Sinks insert idempotently on ``event_id``, so a batch sent twice (a crash after
the sink accepted it and before the outbox forgot it) is stored once.
``EXAI_AUDIT_SINK=none`` uses :class:`LocalOnlySink`: events are "delivered" to
the outbox's own archive, which is a bounded ring, so the trail stays local and
the file never grows past its limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from exai.redact import mask_url_credentials

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = [
    "LocalOnlySink",
    "Sink",
    "SinkError",
    "SinkRejected",
    "SinkUnavailable",
    "is_permanent_http_status",
    "make_sink",
    "sink_from_spec",
    "sink_spec",
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


def sink_spec(settings: Settings) -> dict[str, Any]:
    """What the sink ``EXAI_AUDIT_SINK`` names needs, as plain values (credentials included).

    The writer process builds its sink from this (:func:`sink_from_spec`); it
    is checked here, in the daemon, so a missing value stops start-up.
    """
    kind = settings.audit_sink
    if kind == "supabase":
        if not settings.supabase_url or settings.supabase_service_role_key is None:
            raise ValueError(
                "EXAI_AUDIT_SINK=supabase needs SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY"
            )
        key = settings.supabase_service_role_key.get_secret_value()
        return {"kind": kind, "url": settings.supabase_url, "key": key}
    if kind == "postgres":
        if settings.audit_postgres_url is None:
            raise ValueError("EXAI_AUDIT_SINK=postgres needs EXAI_AUDIT_POSTGRES_URL")
        return {"kind": kind, "url": settings.audit_postgres_url.get_secret_value()}
    if kind == "jsonl":
        path = settings.audit_jsonl_path or settings.data_dir / "audit.jsonl"
        return {"kind": kind, "path": str(path)}
    return {"kind": "none"}


def sink_from_spec(spec: dict[str, Any], *, timeout_s: float = 30.0) -> Sink:
    """The sink a :func:`sink_spec` describes, configured but not yet opened."""
    kind = spec["kind"]
    if kind == "supabase":
        from exai.audit.supabase_sink import SupabaseSink

        return SupabaseSink(spec["url"], spec["key"], timeout_s=timeout_s)
    if kind == "postgres":
        from exai.audit.postgres_sink import PostgresSink

        return PostgresSink(spec["url"], timeout_s=timeout_s)
    if kind == "jsonl":
        from exai.audit.jsonl_sink import JsonlSink

        return JsonlSink(Path(spec["path"]))
    return LocalOnlySink()


def make_sink(settings: Settings, *, timeout_s: float = 30.0) -> Sink:
    """The sink named by ``EXAI_AUDIT_SINK``, configured but not yet opened."""
    return sink_from_spec(sink_spec(settings), timeout_s=timeout_s)
