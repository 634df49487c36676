"""What an audit event is: its kinds, its stamped fields and its row shape.

An event is a flat JSON object. Every event carries ``event_id`` (a UUID4,
the key that makes delivery idempotent), ``ts`` (UTC, ISO 8601 with
microseconds, so that string order is time order), ``instance_id`` and
``kind``. The sinks store the fields that queries filter on as columns of
``audit_events`` (:data:`COLUMNS`) and everything else in its ``data`` jsonb,
so a new field never needs a migration.
"""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime
from typing import Any, Final, Literal

__all__ = [
    "COLUMNS",
    "KINDS",
    "EventKind",
    "args_digest",
    "format_ts",
    "new_event",
    "new_event_id",
    "parse_ts",
    "to_row",
]

EventKind = Literal[
    "connection_opened",
    "connection_closed",
    "call_started",
    "call_finished",
    # A model face's request (which face, the model asked for, the client's id for
    # its user or session) beside the call_* events of the call that answers it.
    "model_request",
    "provider_request",
    "conversation_turn",
    "auth_failed",
    "memory_written",
    "memory_recalled",
    "memory_injected",
    "memory_forgotten",
    "memory_extraction_failed",
]
KINDS: Final[frozenset[str]] = frozenset(EventKind.__args__)  # type: ignore[attr-defined]

COLUMNS: Final[tuple[str, ...]] = (
    "event_id",
    "kind",
    "ts",
    "instance_id",
    "session_id",
    "request_id",
    "thread_id",
    "principal",
    "tool",
)
"""First-class columns of ``audit_events``, in table order; the rest goes to ``data``."""

_STAMPED: Final = frozenset({"event_id", "ts", "instance_id", "kind"})
_V4_CLEAR: Final = 0xFFFFFFFF_FFFF_0FFF_3FFF_FFFFFFFFFFFF  # version and variant bits
_V4_SET: Final = 0x00000000_0000_4000_8000_000000000000  # version 4, RFC 4122 variant


def format_ts(moment: datetime) -> str:
    """The one timestamp format of the trail: UTC, microseconds, ``+00:00``."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_ts(text: str) -> datetime:
    """Read an ISO 8601 time (``Z`` allowed); a naive time is taken as UTC."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def new_event_id() -> str:
    """A random (version 4) UUID, from the process's PRNG rather than ``os.urandom``.

    ``emit`` is on every call's path and this is three times cheaper than
    ``uuid.uuid4()``. An event id must be unique, not unguessable; ``random``
    is seeded from the OS and reseeded in a forked child, so processes differ.
    """
    h = "%032x" % ((random.getrandbits(128) & _V4_CLEAR) | _V4_SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_event(kind: str, instance_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Stamp ``fields`` as an event. Fields cannot override the stamped keys."""
    event = {key: value for key, value in fields.items() if key not in _STAMPED}
    event["event_id"] = new_event_id()
    event["ts"] = datetime.now(UTC).isoformat(timespec="microseconds")
    event["instance_id"] = instance_id
    event["kind"] = kind
    return event


def to_row(event: dict[str, Any]) -> dict[str, Any]:
    """The ``audit_events`` row for an event: its columns plus ``data``."""
    row = {column: event.get(column) for column in COLUMNS}
    row["data"] = {key: value for key, value in event.items() if key not in row}
    return row


def args_digest(arguments: dict[str, Any]) -> tuple[str, int]:
    """SHA-256 hex digest and size in bytes of a call's arguments.

    The audit trail records these instead of the arguments themselves, which
    may hold source code or secrets. The JSON is canonical (sorted keys, no
    spaces), so equal arguments give equal digests whatever their key order.
    """
    encoded = json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()
    return hashlib.sha256(encoded).hexdigest(), len(encoded)
