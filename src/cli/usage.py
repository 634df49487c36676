"""``exai usage``: what calls cost over a period, by principal, tool, thread, model,
provider, day, key or face, optionally split by a second of day, principal, key,
face and model.

Operator-side, like ``exai conversations``: it reads the store ``EXAI_STORE_URL``
names (every daemon sharing it) and sums every principal's calls. Times are UTC.
Grouped by principal, tool, thread, model, provider or day, it reads the cost
ledger (one row per model call, with cached tokens); by key or face, or with
``--split``, the daily usage sums (every call, whole UTC days; docs/cost.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from exai.accounting.report import day_span, period, render_sums, render_table, report, sums_report
from exai.cli.common import run_reported
from exai.cli.numbers import number
from exai.settings import load_settings
from exai.store import open_store
from exai.store.costs import COST_GROUPS
from exai.store.usage import USAGE_GROUPS

__all__ = ["register"]

_GROUPS = list(dict.fromkeys([*COST_GROUPS, *USAGE_GROUPS]))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("usage", help="calls, tokens and cost over a period (all principals)")
    p.add_argument("--since", help="start, YYYY-MM-DD or ISO 8601 (UTC unless stated)")
    p.add_argument("--until", help="end, exclusive (default: now)")
    p.add_argument("--days", type=number(0.001, 36500),
                   help="the last N days (default 30; ignored with --since)")  # fmt: skip
    p.add_argument("--by", choices=_GROUPS, default="principal",
                   help="group by (default: %(default)s)")  # fmt: skip
    p.add_argument("--split", choices=list(USAGE_GROUPS),
                   help="and within each group, by this (e.g. --by day --split model)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_reported(_usage(args))


async def _usage(args: argparse.Namespace) -> int:
    daily = args.by in ("key", "face") or args.split is not None
    if daily and args.by not in USAGE_GROUPS:
        raise ValueError(f"--split needs --by one of {', '.join(USAGE_GROUPS)} (the daily sums "
                         f"keep no {args.by})")  # fmt: skip
    if daily:
        first, end = day_span(time.time(), since=args.since, until=args.until, days=args.days)
    else:
        since, until = period(time.time(), since=args.since, until=args.until, days=args.days)
    store = await open_store(load_settings())
    try:
        if daily:
            sums = await store.usage_sums(first, end, args.by, args.split)
            names = await _key_names(store) if "key" in (args.by, args.split) else {}
        else:
            lines = await store.usage_report(since, until, args.by)
    finally:
        await store.aclose()
    if daily:
        data = sums_report(sums, args.by, args.split, first, end, names)
        text = render_sums(data, bars=sys.stdout.isatty())
    else:
        data = report(lines, args.by, since, until)
        text = render_table(data)
    print(json.dumps(data, indent=2) if args.json else text)
    return 0


async def _key_names(store: Any) -> dict[str, str]:
    """Each key's name, to label its id (none on a store that keeps no keys)."""
    if not hasattr(store, "keys_and_jtis"):
        return {}
    _, keys, _ = await store.keys_and_jtis()
    return {key.id: key.name for key in keys if key.name}
