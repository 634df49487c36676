"""The outbox file: order, acknowledgement, quarantine, the size limit, the archive."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from exai.audit.events import new_event
from exai.audit.outbox import AuditOutbox
from exai.audit.outbox_sql import MIGRATIONS


def events(n: int, **fields: object) -> list[dict]:
    return [new_event("call_started", "inst", {"request_id": str(i), **fields}) for i in range(n)]


def open_outbox(tmp_path: Path, **kwargs: int) -> AuditOutbox:
    outbox = AuditOutbox(tmp_path / "outbox.sqlite3", **{"max_events": 1000, **kwargs})
    outbox.open()
    return outbox


def test_head_is_oldest_first_and_acknowledge_archives_and_counts(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path)
    batch = events(10)
    outbox.append(batch)
    head = outbox.head(4)
    assert [row.event_id for row in head] == [e["event_id"] for e in batch[:4]]
    outbox.acknowledge(head)
    status = outbox.status()
    assert (status.backlog, status.shipped, status.archived) == (6, 4, 4)
    assert status.oldest_ts == batch[4]["ts"]


def test_appending_an_event_twice_stores_it_once(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path)
    batch = events(3)
    assert outbox.append(batch).stored == 3
    assert outbox.append(batch).stored == 0
    assert outbox.status().backlog == 3


def test_beyond_the_limit_events_are_dropped_and_counted_persistently(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path, max_events=10)
    result = outbox.append(events(8))
    assert (result.stored, result.dropped) == (8, 0)
    outbox.quarantine(outbox.head(2), "bad")
    result = outbox.append(events(5), dropped_before=3)
    assert (result.stored, result.dropped) == (2, 6)
    outbox.close()
    reopened = open_outbox(tmp_path, max_events=10)
    status = reopened.status()
    assert (status.backlog, status.quarantined, status.dropped) == (8, 2, 6)


def test_quarantine_keeps_reason_and_resend_requeues(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path)
    outbox.append(events(5))
    rejected = outbox.head(2)
    outbox.quarantine(rejected, "HTTP 400 PGRST204: no column")
    rows = outbox.quarantined_rows()
    assert [r["event_id"] for r in rows] == [r.event_id for r in rejected]
    assert rows[0]["reason"] == "HTTP 400 PGRST204: no column"
    assert outbox.status().backlog == 3
    assert outbox.resend([rejected[0].event_id]) == 1
    assert outbox.resend() == 1
    assert outbox.status().backlog == 5 and outbox.status().quarantined == 0


def test_archive_is_a_ring_and_replay_requeues_by_time(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path, archive_max_events=5)
    batch = events(8)
    outbox.append(batch)
    outbox.acknowledge(outbox.head(8))
    assert outbox.status().archived == 5
    assert outbox.replay(batch[6]["ts"]) == 2
    assert [row.event_id for row in outbox.head(10)] == [e["event_id"] for e in batch[6:]]
    assert [e["event_id"] for e in outbox.recent(3)] == [e["event_id"] for e in batch[5:]]


def test_newer_than_follows_new_rows_in_both_tables(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path)
    outbox.append(events(2))
    marks = outbox.marks()
    later = events(3)
    outbox.append(later)
    outbox.acknowledge(outbox.head(5))
    found, marks = outbox.newer_than(marks)
    ids = [e["event_id"] for e in found]
    assert set(ids) >= {e["event_id"] for e in later}
    assert outbox.newer_than(marks)[0] == []


def test_an_outbox_from_before_versions_keeps_its_events_and_is_versioned(tmp_path: Path) -> None:
    """A file the outbox wrote before it recorded its schema version (the tables made
    by one script, no version table) opens at version 1 with every event still due."""
    path = tmp_path / "audit-outbox.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(MIGRATIONS[0][1])
    event = new_event("call_finished", "old-daemon", {"principal": "alice"})
    row = (event["event_id"], event["ts"], event["kind"], '{"principal": "alice"}')
    old.execute("INSERT INTO outbox (event_id, ts, kind, body) VALUES (?, ?, ?, ?)", row)
    old.commit()
    old.close()

    outbox = AuditOutbox(path, max_events=100)
    outbox.open()
    try:
        assert [row.event_id for row in outbox.head(10)] == [event["event_id"]]
        assert outbox.pending == 1
        versions = outbox.db.execute("SELECT version FROM outbox_schema_version").fetchall()
        assert versions == [(1,)]
    finally:
        outbox.close()
    reopened = AuditOutbox(path, max_events=100)  # a second open applies nothing again
    reopened.open()
    reopened.close()
