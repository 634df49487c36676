"""Event stamping, the row mapping and the argument digest."""

from __future__ import annotations

import hashlib
import uuid

from exai.audit import COLUMNS, args_digest
from exai.audit.events import new_event, parse_ts, to_row


def test_args_digest_ignores_key_order_and_counts_bytes() -> None:
    digest, size = args_digest({"b": [1, 2], "a": "é"})
    same, same_size = args_digest({"a": "é", "b": [1, 2]})
    canonical = '{"a":"é","b":[1,2]}'.encode()
    assert (digest, size) == (same, same_size)
    assert digest == hashlib.sha256(canonical).hexdigest()
    assert size == len(canonical)


def test_new_event_stamps_id_time_instance_and_kind_which_fields_cannot_override() -> None:
    event = new_event("call_started", "inst-1", {"event_id": "x", "kind": "y", "tool": "chat"})
    assert uuid.UUID(event["event_id"]).version == 7
    assert event["kind"] == "call_started"
    assert event["instance_id"] == "inst-1"
    assert event["tool"] == "chat"
    assert parse_ts(event["ts"]).utcoffset().total_seconds() == 0


def test_to_row_puts_query_fields_in_columns_and_the_rest_in_data() -> None:
    event = new_event("call_finished", "i", {"session_id": "s", "tool": "chat", "duration_ms": 5})
    row = to_row(event)
    assert list(row) == [*COLUMNS, "data"]
    assert row["session_id"] == "s" and row["thread_id"] is None
    assert row["data"] == {"duration_ms": 5}
