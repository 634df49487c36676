"""``exai audit``: look into the audit outbox and send events again.

Everything here reads or edits the outbox file (``EXAI_DATA_DIR``), never the
daemon, so it works whether or not a daemon runs; SQLite's WAL lets it read
while the daemon writes. Events queued by ``replay`` or ``quarantine resend``
are shipped by the daemon's shipper (at once if it runs, else at its next start).

- ``status``: backlog, age of the oldest event, shipped / quarantined / dropped
  counts, last error.
- ``tail [-n N] [--follow] [--json]``: the newest events, shipped or not.
- ``replay --since ISO [--until ISO]``: re-queue archived (already shipped)
  events; delivery is idempotent on ``event_id``, so only rows missing from the
  sink are added. The archive keeps the newest ``EXAI_AUDIT_MAX_OUTBOX_EVENTS``.
- ``quarantine list`` / ``quarantine resend [EVENT_ID ...]``: show rejected
  events and their reason; move them (all, or those named) back to the outbox.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from exai.audit.events import COLUMNS, format_ts, parse_ts
from exai.audit.outbox import AuditOutbox
from exai.cli.common import EXIT_USAGE, load_or_exit, say
from exai.cli.numbers import number
from exai.cli.requests import add_command as add_requests

__all__ = ["register"]

# The module's docstring is reStructuredText for the API docs; --help is read in a terminal.
_DESCRIPTION = (
    "Look into the audit outbox (audit-outbox.sqlite3 in EXAI_DATA_DIR) and send events "
    "again. Everything here reads or edits that file, never the daemon, so it works whether "
    "or not a daemon runs. Events queued by replay or quarantine resend are shipped by the "
    "daemon: at once if it runs, else when it next starts."
)
_STAMPED = ("event_id", "ts", "instance_id", "kind")
_FOLLOW_POLL_S = 0.5
_SEEN_MAX = 100_000


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit", help="inspect the audit trail outbox and send events again",
        description=_DESCRIPTION,
    )  # fmt: skip
    actions = parser.add_subparsers(dest="audit_action", metavar="ACTION")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])

    add_requests(actions, "requests")  # the request log, the same as `exai requests`
    status = actions.add_parser("status", help="backlog, counts and last error")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(func=_status)

    tail = actions.add_parser("tail", help="the newest events, shipped or not")
    tail.add_argument("-n", type=number(1, 1000000, integer=True), default=20, metavar="N",
                      help="how many (default 20)")  # fmt: skip
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.add_argument("--json", action="store_true", help="one JSON event per line")
    tail.set_defaults(func=_tail)

    replay = actions.add_parser("replay", help="queue archived events for delivery again")
    replay.add_argument("--since", required=True, help="ISO 8601 time, e.g. 2025-01-31T12:00Z")
    replay.add_argument("--until", help="ISO 8601 time (exclusive); default: now")
    replay.set_defaults(func=_replay)

    quarantine = actions.add_parser("quarantine", help="events the sink rejected for good")
    q_actions = quarantine.add_subparsers(dest="quarantine_action", metavar="ACTION")
    quarantine.set_defaults(func=lambda args: (quarantine.print_help(), 2)[1])
    q_list = q_actions.add_parser("list", help="show quarantined events and why")
    q_list.add_argument("-n", type=number(1, 1000000, integer=True), default=None, metavar="N",
                        help="at most N")  # fmt: skip
    q_list.add_argument("--json", action="store_true", help="one JSON object per line")
    q_list.set_defaults(func=_quarantine_list)
    q_resend = q_actions.add_parser("resend", help="move quarantined events back to the outbox")
    q_resend.add_argument("event_ids", nargs="*", metavar="EVENT_ID", help="default: all")
    q_resend.set_defaults(func=_quarantine_resend)


def _open(must_exist: bool = True) -> AuditOutbox | None:
    settings = load_or_exit()
    path = settings.outbox_path
    if must_exist and not path.exists():
        say(f"no audit outbox at {path}: no daemon with the audit trail on "
            "(EXAI_AUDIT_ENABLED) has run with this EXAI_DATA_DIR")  # fmt: skip
        return None
    outbox = AuditOutbox(path, max_events=settings.audit_max_outbox_events)
    outbox.open()
    return outbox


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _status(args: argparse.Namespace) -> int:
    outbox = _open()
    if outbox is None:
        return 1
    try:
        status = outbox.status()
    finally:
        outbox.close()
    now = time.time()
    oldest_age = (
        (datetime.now(UTC) - parse_ts(status.oldest_ts)).total_seconds()
        if status.oldest_ts else None
    )  # fmt: skip
    if args.json:
        data = {**dataclasses.asdict(status), "oldest_event_age_s": oldest_age}
        print(json.dumps(data))
        return 0
    lines = [
        ("outbox", status.path),
        ("sink", status.sink or "-"),
        ("backlog", f"{status.backlog} events"
         + (f" (oldest {status.oldest_ts}, {_ago(oldest_age)})" if status.oldest_ts else "")),
        ("shipped", str(status.shipped)),
        ("quarantined", str(status.quarantined)),
        ("dropped", str(status.dropped)),
        ("archived", f"{status.archived} events kept for replay"),
        ("last shipped", _ago(now - status.last_shipped_at) if status.last_shipped_at else "-"),
        ("last error", f"{status.last_error} ({_ago(now - status.last_error_at)})"
         if status.last_error and status.last_error_at else (status.last_error or "-")),
    ]  # fmt: skip
    for name, value in lines:
        print(f"{name:<13}{value}")
    return 0


def _line(event: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(event, ensure_ascii=False)
    parts = [str(event.get("ts", "")), f"{event.get('kind', '?'):<18}"]
    for name in (*COLUMNS[4:], *sorted(k for k in event if k not in COLUMNS)):
        if name in _STAMPED or event.get(name) is None:
            continue
        value = event[name]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{name}={text if len(text) <= 80 else text[:77] + '...'}")
    return " ".join(parts)


def _tail(args: argparse.Namespace) -> int:
    outbox = _open()
    if outbox is None:
        return 1
    try:
        marks = outbox.marks()
        events = outbox.recent(max(args.n, 0))
        seen: deque[str] = deque(maxlen=_SEEN_MAX)
        seen_set: set[str] = set()

        def show(batch: list[dict[str, Any]]) -> None:
            for event in batch:
                event_id = str(event.get("event_id"))
                if event_id in seen_set:
                    continue
                if len(seen) == seen.maxlen:
                    seen_set.discard(seen[0])
                seen.append(event_id)
                seen_set.add(event_id)
                print(_line(event, args.json), flush=True)

        show(events)
        while args.follow:
            time.sleep(_FOLLOW_POLL_S)
            batch, marks = outbox.newer_than(marks)
            show(batch)
    except KeyboardInterrupt:
        pass
    finally:
        outbox.close()
    return 0


def _iso(text: str) -> str:
    return format_ts(parse_ts(text))


def _replay(args: argparse.Namespace) -> int:
    try:
        since = _iso(args.since)
        until = _iso(args.until) if args.until else None
    except ValueError as exc:
        say(f"not an ISO 8601 time: {exc}")
        return EXIT_USAGE
    outbox = _open()
    if outbox is None:
        return 1
    try:
        queued = outbox.replay(since, until)
    finally:
        outbox.close()
    print(f"queued {queued} archived events since {since} for delivery")
    return 0


def _quarantine_list(args: argparse.Namespace) -> int:
    outbox = _open()
    if outbox is None:
        return 1
    try:
        rows = outbox.quarantined_rows(args.n)
    finally:
        outbox.close()
    for row in rows:
        if args.json:
            event = json.loads(row.pop("body"))
            print(json.dumps({**row, "event": event}, ensure_ascii=False))
        else:
            print(f"{row['ts']} {row['kind']:<18} {row['event_id']}  {row['reason']}")
    if not args.json:
        print(f"{len(rows)} quarantined events", file=sys.stderr)
    return 0


def _quarantine_resend(args: argparse.Namespace) -> int:
    outbox = _open()
    if outbox is None:
        return 1
    try:
        moved = outbox.resend(args.event_ids or None)
    finally:
        outbox.close()
    print(f"moved {moved} quarantined events back to the outbox")
    return 0
