"""``exai memory``: list, show, add, rm, export, import and reembed long-term memories.

The commands act on the memory store ``EXAI_MEMORY_URL`` names (see
:mod:`exai.memory.backends`) as the operator: they see every principal's
memories, and ``--owner`` narrows to one. Export writes JSONL, one memory a line
without its vector (vectors belong to a model; ``import`` embeds again with the
configured one). Writes and deletions are audited like the tools' when the audit
trail is on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from exai.auth import ANONYMOUS
from exai.cli import numbers
from exai.cli.common import run_reported
from exai.errors import ValidationError_
from exai.memory import MEMORY_TYPES, MemoryService, open_memory
from exai.memory.base import ANY_OWNER, Owner
from exai.settings import load_settings

__all__ = ["register"]

Action = Callable[[MemoryService, argparse.Namespace, TextIO], Awaitable[int]]

# What MemoryService.remember did, in words: stored anew, refreshed a memory that said
# nearly the same, or found the same words already stored.
_DONE = {"insert": "remembered", "update": "updated the near duplicate",
         "duplicate": "already remembered as"}  # fmt: skip
_DONE_COUNTS = {"insert": "remembered", "update": "updated near duplicates",
                "duplicate": "already remembered"}  # fmt: skip


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("memory", help="manage long-term memories")
    sub = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="memories, most recently updated first")
    p.add_argument("--owner", help="only this principal's memories")
    p.add_argument("--type", action="append", choices=MEMORY_TYPES, dest="types")
    p.add_argument("--limit", type=numbers.number(1, 100000, integer=True),
                   default=50)  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_command(_list))

    p = sub.add_parser("show", help="one memory")
    p.add_argument("id")
    p.set_defaults(func=_command(_show))

    p = sub.add_parser("add", help="remember something for a principal")
    p.add_argument("content")
    p.add_argument("--owner", default=ANONYMOUS, help="the principal (default: %(default)s)")
    p.add_argument("--type", default="fact", choices=MEMORY_TYPES)
    p.add_argument("--tag", action="append", default=[], dest="tags")
    p.add_argument("--project", help="absolute project root it applies to")
    p.set_defaults(func=_command(_add))

    p = sub.add_parser("rm", help="forget memories by id")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.set_defaults(func=_command(_rm))

    p = sub.add_parser("export", help="memories as JSONL")
    p.add_argument("--owner", help="only this principal's memories")
    p.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    p.set_defaults(func=_command(_export))

    p = sub.add_parser("import", help="memories from an export (duplicates are skipped)")
    p.add_argument("file", type=Path, help="JSONL file, or - for standard input")
    p.add_argument("--owner", help="store every memory under this principal instead")
    p.add_argument("--bulk", action="store_true",
                   help="embed in batches and load at once, without merging near duplicates"
                        " (for large imports: on Postgres the search indexes are built after"
                        " the load)")  # fmt: skip
    p.set_defaults(func=_command(_import))

    p = sub.add_parser("reembed", help="give every memory a vector from the configured model")
    p.set_defaults(func=_command(_reembed))


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return run_reported(_with_service(action, args))

    return run


async def _with_service(action: Action, args: argparse.Namespace) -> int:
    settings = load_settings()
    audit: Any = None
    if settings.audit_enabled:
        from exai.audit.trail import AuditTrail

        audit = AuditTrail(settings)
        await audit.start()
    service = await open_memory(settings, audit.emit if audit is not None else None)
    try:
        return await action(service, args, sys.stdout)
    finally:
        await service.aclose()
        if audit is not None:
            await audit.stop()


def _owner(args: argparse.Namespace) -> Owner:
    return args.owner if getattr(args, "owner", None) else ANY_OWNER


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


async def _list(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    found = await service.store.list_memories(_owner(args), types=args.types, limit=args.limit)
    for memory in found:
        if args.json:
            out.write(json.dumps(memory.as_dict(), ensure_ascii=False) + "\n")
            continue
        content = memory.content if len(memory.content) <= 70 else memory.content[:67] + "..."
        out.write(f"{memory.id}  {_when(memory.updated_at)}  {memory.owner:<12} "
                  f"{memory.type:<12} {content}\n")  # fmt: skip
    return 0


async def _show(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    memory = await service.store.get(args.id, ANY_OWNER)
    out.write(json.dumps(memory.as_dict(), ensure_ascii=False, indent=2) + "\n")
    return 0


async def _add(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    done = await service.remember(args.owner, args.content, args.type, args.tags, args.project,
                                  source="cli")  # fmt: skip
    out.write(f"{_DONE[done.action]} {done.memory.id}\n")
    return 0


async def _rm(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    for memory_id in args.ids:
        await service.forget(ANY_OWNER, memory_id)
        out.write(f"forgot {memory_id}\n")
    return 0


async def _export(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    lines: list[str] = []
    offset = 0
    while True:
        page = await service.store.list_memories(_owner(args), limit=500, offset=offset)
        lines += [json.dumps(m.as_dict(), ensure_ascii=False) + "\n" for m in page]
        if len(page) < 500:
            break
        offset += 500
    if args.output is not None:
        args.output.write_text("".join(lines), encoding="utf-8")
    else:
        out.writelines(lines)
    print(f"exported {len(lines)} memories", file=sys.stderr)
    return 0


async def _import(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text(encoding="utf-8")
    items: list[tuple[str, str, str, list[str], str | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            owner = args.owner or item["owner"]
            content = item["content"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError_(f"line {number}: not a memory export line ({exc})") from None
        items.append((owner, content, item.get("type", "fact"), item.get("tags") or [],
                      item.get("project")))  # fmt: skip
    if args.bulk:
        stored = await service.import_many(items, source="import")
        out.write(f"remembered {stored}, already remembered {len(items) - stored}\n")
        return 0
    counts: dict[str, int] = {}
    for owner, content, type_, tags, project in items:
        done = await service.remember(owner, content, type_, tags, project, source="import")
        counts[done.action] = counts.get(done.action, 0) + 1
    said = [f"{_DONE_COUNTS[action]} {counts[action]}" for action in _DONE_COUNTS
            if action in counts]  # fmt: skip
    out.write((", ".join(said) or "nothing to import") + "\n")
    return 0


async def _reembed(service: MemoryService, args: argparse.Namespace, out: TextIO) -> int:
    changed = await service.reembed()
    out.write(f"re-embedded {changed} memories with {service.chain.model}\n")
    return 0
