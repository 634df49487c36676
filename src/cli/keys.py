"""``exai keys``: create, list, revoke and rotate the operator's keys, revoke a JWT.

The commands act on the store ``EXAI_STORE_URL`` names, as the operator, like
``exai conversations``; every daemon on that store honours the change within a
second (docs/keys.md). ``create`` and ``rotate`` print the new key once, on a line
of its own; nothing keeps it, so it cannot be shown again.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from exai.cli.common import run_reported
from exai.cli.operator_audit import OperatorAudit
from exai.settings import load_settings
from exai.store import open_store

if TYPE_CHECKING:  # exai.daemon brings the whole daemon: every `exai` command would pay it
    from exai.daemon.keys import StoreKeyAdmin

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("keys", help="the operator's keys (docs/keys.md)")
    sub = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)

    p = sub.add_parser("create", help="make a key and print it once")
    p.add_argument("--principal", required=True, help="who the key signs in as")
    p.add_argument("--scopes", help="tools it may call, e.g. chat,completion (default: all)")
    p.add_argument("--budget", help="what it may spend, e.g. '5 USD/day' (default: settings)")
    p.add_argument("--rate", help="calls a minute, e.g. 60/min (default: settings)")
    p.add_argument("--models", help="models it may use, e.g. kimi-k2.6,glm-5.1 (default: all)")
    p.add_argument("--expires", help="30d, 12h, 90m or an ISO date (default: never)")
    p.add_argument("--name", default="", help="a name to find it by")
    p.add_argument("--note", default="", help="what it is for")
    p.add_argument("--json", action="store_true", help="print the key and its record as JSON")
    p.set_defaults(func=_command(_create))

    p = sub.add_parser("list", help="every key, newest first (never a secret)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--active", action="store_true", help="only keys that still sign in")
    p.set_defaults(func=_command(_list))

    p = sub.add_parser("update", help="change a key's grant at run time (only what is given; "
                       "an empty value goes back to the default)")  # fmt: skip
    p.add_argument("id")
    for name in ("scopes", "budget", "rate", "models", "expires", "name", "note"):
        p.add_argument(f"--{name}")
    p.set_defaults(func=_command(_update))

    p = sub.add_parser("revoke", help="refuse a key (or a JWT by its jti) from now on")
    p.add_argument("id", nargs="?", help="the key's id (exai_<id>_...)")
    p.add_argument("--jti", help="revoke the JWT with this jti claim instead")
    p.add_argument("--note", default="", help="why (kept with a revoked jti)")
    p.set_defaults(func=_command(_revoke))

    p = sub.add_parser("rotate", help="a new secret with the same settings; the old key is revoked")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_command(_rotate))


def _command(action: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        return run_reported(_with_admin(action, args))

    return run


async def _with_admin(action: Any, args: argparse.Namespace) -> int:
    settings = load_settings()
    store = await open_store(settings)
    audit = OperatorAudit(settings)
    try:
        if not hasattr(store, "keys_and_jtis"):
            raise ValueError("this store keeps no keys")
        from exai.daemon.keys import StoreKeyAdmin

        code: int = await action(StoreKeyAdmin(store, emit=audit.emit), args, sys.stdout)
        return code
    finally:
        await store.aclose()
        await asyncio.to_thread(audit.flush)  # a SQLite write: off the loop


def _operator() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


async def _create(admin: StoreKeyAdmin, args: argparse.Namespace, out: TextIO) -> int:
    grant = {"principal": args.principal, "scopes": args.scopes, "budget": args.budget,
             "rate": args.rate, "models": args.models, "expires": args.expires,
             "name": args.name, "note": args.note}  # fmt: skip
    key, token = await admin.create_key(grant, by=_operator())
    if args.json:
        out.write(json.dumps({"key": token, **key}) + "\n")
        return 0
    out.write(f"{token}\n")
    sys.stderr.write(f"key {key['id']} for {key['principal']}: {_grant(key)}\n"
                     "This is the only time the key is shown; keep it now.\n")  # fmt: skip
    return 0


async def _list(admin: StoreKeyAdmin, args: argparse.Namespace, out: TextIO) -> int:
    keys = await admin.list_keys()
    if args.active:
        keys = [k for k in keys if k["state"] == "active"]
    if args.json:
        for key in keys:
            out.write(json.dumps(key) + "\n")
        return 0
    rows = [("ID", "STATE", "PRINCIPAL", "NAME", "SCOPES", "MODELS", "RATE", "BUDGET",
             "KEY SPENT", "PRINCIPAL SPENT", "LAST USED", "EXPIRES")]  # fmt: skip
    for k in keys:
        budget = k["budget"]
        rows.append((
            k["id"], k["state"], k["principal"], k["name"] or "-",
            ",".join(k["scopes"]) if k["scopes"] is not None else "all",
            ",".join(k["models"]) if k["models"] is not None else "all",
            f"{k['rate_per_min']}/min" if k["rate_per_min"] else "default",
            f"{budget['amount']} {budget['currency']}/{budget['period']}" if budget else "default",
            f"{_money(k['key_spent'])} {budget['currency']}" if budget else "-",
            f"{_money(k['spent'])} {budget['currency']}" if budget else "-",
            _when(k["last_used_at"]), _when(k["expires_at"], "never"),
        ))  # fmt: skip
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        out.write("\n")
    return 0


async def _update(admin: StoreKeyAdmin, args: argparse.Namespace, out: TextIO) -> int:
    changes = {name: getattr(args, name) for name in
               ("scopes", "budget", "rate", "models", "expires", "name", "note")
               if getattr(args, name) is not None}  # fmt: skip
    if not changes:
        raise ValueError("give at least one of --scopes, --budget, --rate, --models, --expires, "
                         "--name, --note")  # fmt: skip
    key = await admin.update_key(args.id, changes, by=_operator())
    out.write(f"key {key['id']} ({key['principal']}): {_grant(key)}\n")
    return 0


async def _revoke(admin: StoreKeyAdmin, args: argparse.Namespace, out: TextIO) -> int:
    if (args.id is None) == (args.jti is None):
        raise ValueError("give a key's ID or --jti JTI (one of them)")
    if args.jti is not None:
        added = await admin.revoke_jti(args.jti, note=args.note, by=_operator())
        out.write(f"jti {args.jti} {'revoked' if added else 'was already revoked'}\n")
        return 0
    key = await admin.revoke_key(args.id, by=_operator())
    out.write(f"key {key['id']} ({key['principal']}) revoked at {_when(key['revoked_at'])}\n")
    return 0


async def _rotate(admin: StoreKeyAdmin, args: argparse.Namespace, out: TextIO) -> int:
    key, token = await admin.rotate_key(args.id, by=_operator())
    if args.json:
        out.write(json.dumps({"key": token, "replaces": args.id, **key}) + "\n")
        return 0
    out.write(f"{token}\n")
    sys.stderr.write(f"key {key['id']} replaces {args.id} (revoked) for {key['principal']}.\n"
                     "This is the only time the key is shown; keep it now.\n")  # fmt: skip
    return 0


def _grant(key: dict[str, Any]) -> str:
    budget = key["budget"]
    parts = [
        "scopes " + (",".join(key["scopes"]) if key["scopes"] is not None else "all"),
        "models " + (",".join(key["models"]) if key["models"] is not None else "all"),
        f"rate {key['rate_per_min']}/min" if key["rate_per_min"] else "rate default",
        f"budget {budget['amount']} {budget['currency']}/{budget['period']}"
        if budget
        else "budget default",
        f"expires {_when(key['expires_at'], 'never')}",
    ]
    return ", ".join(parts)


def _money(text: str | None) -> str:
    return "0" if not text else f"{float(text):.4f}".rstrip("0").rstrip(".") or "0"


def _when(at: float | None, none: str = "-") -> str:
    if at is None:
        return none
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M")
