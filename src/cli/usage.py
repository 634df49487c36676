"""``exai usage``: what calls cost over a period, grouped by principal, tool, thread or model.

Operator-side, like ``exai conversations``: it reads the cost rows of the store
``EXAI_STORE_URL`` names (every daemon sharing it) and sums every principal's
calls. Times are UTC.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from exai.accounting.report import period, render_table, report
from exai.cli.common import run_reported
from exai.cli.numbers import number
from exai.settings import load_settings
from exai.store import open_store
from exai.store.costs import COST_GROUPS

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("usage", help="calls, tokens and cost over a period (all principals)")
    p.add_argument("--since", help="start, YYYY-MM-DD or ISO 8601 (UTC unless stated)")
    p.add_argument("--until", help="end, exclusive (default: now)")
    p.add_argument("--days", type=number(0.001, 36500),
                   help="the last N days (default 30; ignored with --since)")  # fmt: skip
    p.add_argument("--by", choices=list(COST_GROUPS), default="principal",
                   help="group by (default: %(default)s)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_reported(_usage(args))


async def _usage(args: argparse.Namespace) -> int:
    since, until = period(time.time(), since=args.since, until=args.until, days=args.days)
    store = await open_store(load_settings())
    try:
        lines = await store.usage_report(since, until, args.by)
    finally:
        await store.aclose()
    data = report(lines, args.by, since, until)
    print(json.dumps(data, indent=2) if args.json else render_table(data))
    return 0
