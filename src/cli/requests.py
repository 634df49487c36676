"""``exai requests``: the request log (one row per call), filtered, as a table, JSON or CSV.

A command of its own rather than an ``exai audit`` action: ``exai audit`` reads
the audit outbox file, which keeps only the newest events of this machine's
daemon, while the request log is a table of the conversation store, shared by
every daemon on it and kept for ``EXAI_REQUEST_LOG_DAYS``. Like ``exai usage``
it opens the store itself (operator-side: whoever can read the store's
settings sees every principal's calls) and runs the same query as the console's
Requests page (:meth:`exai.store.call_log.CallLog.call_log_page`).

The newest ``-n`` rows are printed, newest first; the last line of the table
says how to ask for the next page (``--before CURSOR``). ``--csv`` writes every
matching row (paged by the same cursor), with formula-like cells made inert.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import UTC, datetime
from typing import Any

from exai.cli.common import run_reported
from exai.cli.numbers import number
from exai.settings import load_settings
from exai.store import open_store
from exai.store.call_log import CallFilter, Cursor

__all__ = ["add_command", "register"]

# (flag, column) of each exact-match filter.
_FLAGS = (
    ("--principal", "principal"), ("--key", "key_id"), ("--face", "face"),
    ("--client", "client"), ("--tool", "tool"), ("--model-asked", "model_asked"),
    ("--model", "model"), ("--status", "status"), ("--error-code", "error_code"),
    ("--trace", "trace_id"), ("--session", "session_id"), ("--request", "request_id"),
    ("--thread", "thread_id"),
)  # fmt: skip
_CSV_PAGE = 1000


def register(subparsers: Any) -> None:
    add_command(subparsers, "requests")


def add_command(subparsers: Any, name: str) -> None:
    """The command under ``name``: ``exai requests``, and ``exai audit requests``, where
    an operator looking into the audit trail looks for it too."""
    p = subparsers.add_parser(
        name, help="the request log: one row per call, filtered (all principals)",
        description="The request log of the conversation store (every daemon on it): one "
        "row per call with its principal and key, face and client, tool, models, tokens, "
        "cost, latency, status and trace, newest first. Filters match exactly.",
    )  # fmt: skip
    for flag, column in _FLAGS:
        choices = ("ok", "error") if column == "status" else None
        p.add_argument(flag, dest=column, default="", choices=choices,
                       help=f"only calls whose {column} is this")  # fmt: skip
    p.add_argument("--since", help="start: YYYY-MM-DD, ISO 8601 (UTC unless stated) or epoch")
    p.add_argument("--until", help="end, exclusive")
    p.add_argument("--last", type=number(0.001, 10_000_000), metavar="HOURS",
                   help="the last HOURS hours (instead of --since)")  # fmt: skip
    p.add_argument("-n", "--limit", type=int, default=50, help="rows (default 50, at most 1000)")
    p.add_argument("--before", default="", help="the cursor a previous page printed")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the page as JSON")
    out.add_argument("--csv", action="store_true", help="write every matching row as CSV")
    p.set_defaults(func=lambda args: run_reported(_requests(args)))


def _time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _filter(args: argparse.Namespace) -> CallFilter:
    values: dict[str, Any] = {column: getattr(args, column) for _, column in _FLAGS}
    values["since"] = _time(args.since)
    values["until"] = _time(args.until)
    if args.last is not None:
        values["since"] = datetime.now(UTC).timestamp() - args.last * 3600
    return CallFilter.of(values)


async def _requests(args: argparse.Namespace) -> int:
    where = _filter(args)
    cursor = Cursor.parse(args.before) if args.before else None
    if args.before and cursor is None:
        raise ValueError(f"--before {args.before!r} is not a cursor this command printed")
    store: Any = await open_store(load_settings())
    try:
        if args.csv:
            await _write_csv(store, where, cursor)
            return 0
        rows = await store.call_log_page(where, before=cursor, limit=args.limit)
    finally:
        await store.aclose()
    from exai.daemon.operator_reads import call_row

    shown = [call_row(row) for row in rows]
    if args.json:
        print(json.dumps({"rows": shown, "filters": where.query()}, indent=2))
        return 0
    print(render_table(shown))
    if rows and len(rows) == max(1, min(args.limit, 1000)):
        print(f"older: --before {shown[-1]['cursor']}")
    return 0


async def _write_csv(store: Any, where: CallFilter, cursor: Cursor | None) -> None:
    # Imported here: the console and the daemon are heavy, and every `exai` command
    # imports this module to build its parser.
    from exai.daemon.operator_reads import call_row
    from exai.web.console.request_log import CSV_COLUMNS, csv_cell

    writer = csv.writer(sys.stdout)
    writer.writerow(CSV_COLUMNS)
    while True:
        rows = await store.call_log_page(where, before=cursor, limit=_CSV_PAGE)
        for row in rows:
            shown = call_row(row)
            shown["at"] = datetime.fromtimestamp(row.at, UTC).isoformat(timespec="milliseconds")
            writer.writerow([csv_cell(shown.get(c)) for c in CSV_COLUMNS])
        if len(rows) < _CSV_PAGE:
            return
        cursor = Cursor(rows[-1].at, int(rows[-1].id or 0))


def render_table(rows: list[dict[str, Any]]) -> str:
    """Rows as a fixed-width table for a terminal."""
    if not rows:
        return "no calls match"
    head = ("time (UTC)", "principal", "key", "face", "client", "tool", "asked", "model",
            "in", "out", "cost", "ms", "status", "trace")  # fmt: skip
    lines = [head]
    for r in rows:
        when = datetime.fromtimestamp(r["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
        cost = f"{r['cost']} {r['currency']}" if r["cost"] is not None else ""
        status = r["error_code"] or r["status"]
        lines.append((when, r["principal"], r["key_id"] or "", r["face"], r["client"] or "",
                      r["tool"], r["model_asked"] or "", r["model"] or "",
                      str(r["prompt_tokens"]), str(r["completion_tokens"]), cost,
                      f"{r['latency_ms']:.0f}", status, (r["trace_id"] or "")[:16]))  # fmt: skip
    cells = [[_printable(c)[:40] for c in line] for line in lines]
    widths = [max(len(line[i]) for line in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in cells)  # fmt: skip


def _printable(text: str) -> str:
    """No control characters (a client's name is the client's to choose)."""
    return "".join(c if c.isprintable() else "?" for c in text)
