"""``exai limits``: a principal's budget, rate and models, changed while daemons run.

Operator-side, like ``exai usage``: it writes the ``principal_limits`` table of the
store ``EXAI_STORE_URL`` names, and every daemon on that store applies the change
within ``EXAI_LIMITS_POLL_S`` (half a second by default), without a restart. What
a request gets is the rule of :mod:`exai.accounting.limits` (docs/cost.md): the
stricter of its key's values and these, these over the environment's defaults.

* ``exai limits set --principal bob --budget "5 USD/day" --rate 600/min --models
  kimi-k2.6`` changes what it names and keeps the rest; ``--budget none``, ``--rate
  none`` or ``--models all`` puts one value back to the default;
* ``exai limits list`` shows every override beside the defaults;
* ``exai limits clear --principal bob`` removes all of bob's overrides.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import time
from typing import Any

from exai.accounting.limits import Overrides, budget_text, merged, overrides_of
from exai.cli.common import run_reported, say
from exai.cli.operator_audit import OperatorAudit
from exai.providers.catalogue import load_catalogue
from exai.settings import load_settings
from exai.settings.values import parse_budgets
from exai.store import open_store

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "limits", help="budgets, rates and models per principal, changed at run time"
    )
    sub = p.add_subparsers(dest="limits_command", metavar="ACTION", required=True)
    s = sub.add_parser("set", help="set a principal's budget, rate or models (the rest is kept)")
    s.add_argument("--principal", required=True, help="the principal (a token's or key's name)")
    s.add_argument("--budget", help='e.g. "5 USD/day" or "100 USD/month"; none: the default')
    s.add_argument("--rate", help="calls a minute, e.g. 600/min or 10/s; none: the default")
    s.add_argument("--models", help="comma-separated model names or aliases; all: every model")
    s.add_argument("--json", action="store_true", help="print the row as JSON")
    s.set_defaults(func=lambda args: run_reported(_set(args)))
    ls = sub.add_parser("list", help="every principal's overrides and the defaults")
    ls.add_argument("--json", action="store_true", help="print them as JSON")
    ls.set_defaults(func=lambda args: run_reported(_list(args)))
    c = sub.add_parser("clear", help="remove a principal's overrides (the defaults apply)")
    c.add_argument("--principal", required=True)
    c.set_defaults(func=lambda args: run_reported(_clear(args)))


async def _set(args: argparse.Namespace) -> int:
    settings = load_settings()
    principal = args.principal.strip()
    if not principal:
        raise ValueError("--principal must name a principal")
    if args.budget is None and args.rate is None and args.models is None:
        raise ValueError("say what to set: --budget, --rate or --models")
    store = await open_store(settings)
    try:
        current = {row.principal: row for row in await store.principal_limits()}
        given = {"budget": args.budget, "rate": args.rate, "models": args.models}
        changes = {name: value for name, value in given.items() if value is not None}
        row = merged(current.get(principal), principal, changes,
                     load_catalogue(settings.models_file), by=_operator(),
                     now=time.time())  # fmt: skip
        await store.put_principal_limits(row)
    finally:
        await store.aclose()
    shown = overrides_of(row).public()
    await _audited(settings, "limits_changed", principal=principal, by=_operator(), limits=shown)
    if args.json:
        print(json.dumps(shown, indent=2))
    else:
        say(f"limits of {principal!r}: {_describe(overrides_of(row))} "
            "(every daemon on this store applies them within a second)")  # fmt: skip
    return 0


async def _audited(settings: Any, kind: str, **fields: Any) -> None:
    """The change as the daemons' limits admin records it (see OperatorAudit)."""
    audit = OperatorAudit(settings)
    audit.emit(kind, **fields)
    await asyncio.to_thread(audit.flush)  # a SQLite write: off the loop


async def _list(args: argparse.Namespace) -> int:
    settings = load_settings()
    store = await open_store(settings)
    try:
        rows = await store.principal_limits()
    finally:
        await store.aclose()
    listed = [overrides_of(row) for row in rows]
    defaults = {
        "budgets": {name: budget_text(b) for name, b in parse_budgets(settings.budgets).items()},
        "rate_per_min": settings.rate_limit_per_min,
        "budget_alert_at": settings.budget_alert_at,
    }
    if args.json:
        print(json.dumps({"defaults": defaults, "principals": [o.public() for o in listed]},
                         indent=2))  # fmt: skip
        return 0
    budgets = ", ".join(f"{k}={v}" for k, v in defaults["budgets"].items()) or "none"
    print(f"defaults: budgets {budgets}; rate {settings.rate_limit_per_min:g}/min "
          "(EXAI_BUDGETS, EXAI_RATE_LIMIT_PER_MIN)")  # fmt: skip
    if not listed:
        print("no principal has limits of its own")
    for item in listed:
        print(f"{item.principal}: {_describe(item)}")
    return 0


async def _clear(args: argparse.Namespace) -> int:
    settings = load_settings()
    store = await open_store(settings)
    try:
        removed = await store.clear_principal_limits(args.principal.strip())
    finally:
        await store.aclose()
    if removed:
        await _audited(settings, "limits_changed", principal=args.principal.strip(), by=_operator(),
                 limits=None)  # fmt: skip
        say(f"limits of {args.principal!r} cleared: the defaults apply")
        return 0
    say(f"{args.principal!r} had no limits of its own")
    return 1


def _describe(item: Overrides) -> str:
    parts = [
        "budget " + (budget_text(item.budget) if item.budget else "default"),
        "rate " + (f"{item.rate_per_min:g}/min" if item.rate_per_min else "default"),
        "models " + (",".join(sorted(item.models)) if item.models is not None else "all"),
    ]
    return "; ".join(parts)


def _operator() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
