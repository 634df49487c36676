"""``exai audit``: status, tail, replay and quarantine, read from the outbox file."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from exai.audit.events import new_event
from exai.audit.outbox import AuditOutbox
from exai.cli import audit as audit_cli


@pytest.fixture
def outbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AuditOutbox]:
    """An outbox with 4 shipped, 3 pending and 2 quarantined events; 1 dropped."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("EXAI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path / "data"))
    box = AuditOutbox(tmp_path / "data" / "audit-outbox.sqlite3", max_events=1000)
    box.open()
    events = [new_event("call_finished", "i", {"request_id": f"r{i}", "tool": "chat"})
              for i in range(9)]  # fmt: skip
    box.append(events, dropped_before=1)
    box.acknowledge(box.head(4))
    box.quarantine(box.head(2), "HTTP 400 PGRST204: no such column")
    box.record_error("HTTP 503 PGRST000: database down")
    box.set_state("sink", "supabase")
    box.events = events  # type: ignore[attr-defined]
    yield box
    box.close()


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="exai")
    audit_cli.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return int(args.func(args))


def test_status_reports_backlog_counts_and_last_error(outbox, capsys) -> None:
    assert run("audit", "status") == 0
    text = capsys.readouterr().out
    assert "backlog      3 events" in text and "supabase" in text
    assert "shipped      4" in text and "quarantined  2" in text and "dropped      1" in text
    assert "database down" in text
    assert run("audit", "status", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["backlog"], data["shipped"], data["quarantined"], data["dropped"]) == (3, 4, 2, 1)
    assert data["oldest_event_age_s"] >= 0


def test_tail_shows_the_newest_events(outbox, capsys) -> None:
    assert run("audit", "tail", "-n", "3", "--json") == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["request_id"] for e in lines] == ["r6", "r7", "r8"]
    assert run("audit", "tail", "-n", "1") == 0
    assert "call_finished" in capsys.readouterr().out


def test_replay_requeues_archived_events_since_a_time(outbox, capsys) -> None:
    since = outbox.events[2]["ts"]
    assert run("audit", "replay", "--since", since) == 0
    assert "queued 2 " in capsys.readouterr().out
    assert outbox.status().backlog == 5
    assert run("audit", "replay", "--since", "yesterday") == 2


def test_quarantine_list_and_resend(outbox, capsys) -> None:
    assert run("audit", "quarantine", "list", "--json") == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["event"]["request_id"] for r in rows] == ["r4", "r5"]
    assert rows[0]["reason"].startswith("HTTP 400")
    assert run("audit", "quarantine", "resend", rows[0]["event_id"]) == 0
    assert "moved 1 " in capsys.readouterr().out
    assert outbox.status().quarantined == 1 and outbox.status().backlog == 4


def test_missing_outbox_is_reported(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path / "nowhere"))
    assert run("audit", "status") == 1
    assert "no audit outbox" in capsys.readouterr().err
