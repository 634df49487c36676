"""What an audit event is: its kinds, its stamped fields and its row shape.

An event is a flat JSON object. Every event carries ``event_id`` (a UUID,
version 7: time-ordered; the key that makes delivery idempotent), ``ts`` (UTC, ISO 8601 with
microseconds, so that string order is time order), ``instance_id`` and
``kind``. The sinks store the fields that queries filter on as columns of
``audit_events`` (:data:`COLUMNS`) and everything else in its ``data`` jsonb,
so a new field never needs a migration.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal

import orjson

__all__ = [
    "COLUMNS",
    "KINDS",
    "EventKind",
    "args_digest",
    "encode_event",
    "event_id_source",
    "format_ts",
    "new_event",
    "new_event_id",
    "parse_ts",
    "stamp_records",
    "to_row",
    "ts_from_epoch",
]

Record = tuple[str, float, Mapping[str, Any]]
"""What ``emit`` keeps: the kind, the time (epoch seconds) and the fields, not yet stamped."""
Row = tuple[str, str, str, str]
"""An outbox row: event_id, ts, kind and the event's JSON."""

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
    "memory_imported",
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
_VERSION_CLEAR: Final = 0xFFFFFFFF_FFFF_0FFF_3FFF_FFFFFFFFFFFF  # version and variant bits
_V7_SET: Final = 0x00000000_0000_7000_8000_000000000000  # version 7, RFC 9562 variant
_MS_MASK: Final = (1 << 48) - 1
_SEED_MASK: Final = (1 << 80) - 1
_LOW_MASK: Final = (1 << 48) - 1

# The standard library's encoder stays for what orjson refuses (an integer past 64
# bits); one instance, since building a JSONEncoder per call cost more than encoding.
_encode_stdlib = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_encode_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


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
    """A time-ordered (version 7) UUID for an event stamped now."""
    return event_id_source(random.getrandbits(128), time.time())(0)


def event_id_source(seed: int, epoch: float) -> Callable[[int], str]:
    """Event ids for one batch whose first event happened at ``epoch``: id ``i`` is fixed
    by ``seed``, ``epoch`` and ``i``.

    They are version 7 UUIDs: the first 48 bits are the time in milliseconds,
    so ids grow with time and the outbox's, the archive's and the sink's unique
    indexes on ``event_id`` grow at one end. With random (version 4) ids an
    insert into a 100,000-row archive cost 20 µs instead of 4, and grew with
    the table. The next 80 bits come from ``seed`` (less the version and
    variant bits), the last 48 being the seed's low bits plus ``i``: unique
    within a batch, random across batches, and the same again when a batch is
    sent twice, which is what lets the outbox store a resent batch once.
    ``random`` rather than ``os.urandom`` makes the seed: an event id must be
    unique, not unguessable, and ``random`` is reseeded in a forked child.
    """
    ms = int(epoch * 1000) & _MS_MASK
    hexed = "%032x" % ((((ms << 80) | (seed & _SEED_MASK)) & _VERSION_CLEAR) | _V7_SET)
    head = f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-"
    low = int(hexed[20:], 16)
    return lambda i: f"{head}{(low + i) & _LOW_MASK:012x}"


_last_second: tuple[int, str] = (-1, "")


def ts_from_epoch(epoch: float) -> str:
    """:func:`format_ts` of a ``time.time()`` value, without building a datetime.

    Events come in runs within one second, so the formatted second is kept.
    """
    global _last_second
    fraction, whole = math.modf(epoch)  # as datetime.fromtimestamp rounds, half to even
    sec, micros = int(whole), round(fraction * 1e6)
    if micros >= 1_000_000:
        sec, micros = sec + 1, micros - 1_000_000
    second = _last_second
    if second[0] != sec:
        second = _last_second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{second[1]}.{micros:06d}+00:00"


def stamp_records(
    records: Sequence[Record],
    seed: int,
    instance_id: str,
    scrub_many: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]],
) -> list[Row]:
    """Outbox rows for emitted records: scrubbed, stamped as :func:`new_event` does, encoded.

    A field named like a stamped key keeps its place in the JSON but not its
    value: the stamp overwrites it.
    """
    if not records:
        return []
    next_id = event_id_source(seed, records[0][1])
    scrubbed = scrub_many([fields for _, _, fields in records])
    rows: list[Row] = []
    for i, ((kind, epoch, _), event) in enumerate(zip(records, scrubbed, strict=True)):
        event_id, ts = next_id(i), ts_from_epoch(epoch)
        event["event_id"] = event_id
        event["ts"] = ts
        event["instance_id"] = instance_id
        event["kind"] = kind
        rows.append((event_id, ts, kind, encode_event(event)))
    return rows


def encode_event(event: dict[str, Any]) -> str:
    """The JSON an outbox row keeps for ``event``: compact, UTF-8 as it is."""
    try:
        return orjson.dumps(event, default=str).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return _encode_stdlib(event)


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
    spaces, UTF-8 as it is), so equal arguments give equal digests whatever
    their key order. It is on every call's path, so orjson encodes it (half the
    instructions of the whole digest with the standard library's encoder), and
    the standard library only what orjson refuses, with the same result.
    """
    try:
        encoded = orjson.dumps(arguments, default=str, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError is one: an integer past 64 bits, say
        encoded = _encode_canonical(arguments).encode()
    return hashlib.sha256(encoded).hexdigest(), len(encoded)
