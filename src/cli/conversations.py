"""``exai conversations``: list, show, export, import, fork, rm and prune stored threads.

The commands act on the store ``EXAI_STORE_URL`` names, as the operator: they see
every principal's threads. Export writes JSONL (see :mod:`exai.store.transcript`),
which ``import`` reads back, along with the plain transcripts other tools write;
a thread already in the store (by id, deleted or not) is skipped and said so, so
an export can be imported again into the store it came from. ``rm`` deletes
threads (their owners no longer see them) and ``prune`` erases what was deleted
or expired.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from exai.auth import ANONYMOUS
from exai.cli.common import run_reported
from exai.cli.numbers import number
from exai.settings import load_settings
from exai.store import ANY_OWNER, ConversationStore, Thread, open_store
from exai.store.transcript import export_lines, parse_transcript

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("conversations", help="manage stored conversations")
    sub = parser.add_subparsers(dest="conversations_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="threads, most recently active first")
    p.add_argument("--owner", help="only this principal's threads")
    p.add_argument("--deleted", action="store_true", help="include deleted and expired threads")
    p.add_argument("--limit", type=number(1, 100000, integer=True), default=50)
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_command(_list))

    p = sub.add_parser("show", help="one thread and its messages")
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="print the thread as export JSONL")
    p.set_defaults(func=_command(_show))

    p = sub.add_parser("export", help="threads as JSONL (all live threads without IDs)")
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    p.set_defaults(func=_command(_export))

    p = sub.add_parser("import", help="threads from an export, or a plain JSONL transcript "
                       "(threads already in the store are skipped)")  # fmt: skip
    p.add_argument("file", type=Path, help="JSONL file, or - for standard input")
    p.add_argument(
        "--owner",
        default=ANONYMOUS,
        help="owner of a plain transcript's thread (default: %(default)s)",
    )
    p.set_defaults(func=_command(_import))

    p = sub.add_parser("fork", help="copy a thread, up to a message, into a new one")
    p.add_argument("id")
    p.add_argument("--at", type=number(0, 2**53, integer=True), metavar="SEQ",
                   help="last message to copy (default: all)")  # fmt: skip
    p.set_defaults(func=_command(_fork))

    p = sub.add_parser("rm", help="delete threads (prune erases them)")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.set_defaults(func=_command(_rm))

    p = sub.add_parser("prune", help="erase deleted and expired threads")
    p.set_defaults(func=_command(_prune))


Action = Callable[[ConversationStore, argparse.Namespace, TextIO], Awaitable[int]]


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return run_reported(_with_store(action, args))

    return run


async def _with_store(action: Action, args: argparse.Namespace) -> int:
    store = await open_store(load_settings())
    try:
        return await action(store, args, sys.stdout)
    finally:
        await store.aclose()


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _thread_line(thread: Thread) -> str:
    title = (thread.title or "").replace("\n", " ")[:50]
    state = " deleted" if thread.deleted_at else ""
    return (f"{thread.id}  {thread.owner:<16} {thread.turns:>6}  {_when(thread.updated_at)}"
            f"{state}  {title}")  # fmt: skip


async def _list(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    owner = args.owner if args.owner else ANY_OWNER
    threads = await store.list_threads(owner, include_deleted=args.deleted, limit=args.limit)
    if args.json:
        for thread in threads:
            print(json.dumps(dataclasses.asdict(thread), ensure_ascii=False), file=out)
        return 0
    print(f"{'ID':<36}  {'OWNER':<16} {'TURNS':>6}  {'UPDATED':<20}  TITLE", file=out)
    for thread in threads:
        print(_thread_line(thread), file=out)
    return 0


async def _show(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    thread = await store.get_thread(args.id, ANY_OWNER)
    messages = await store.messages(thread.id, ANY_OWNER)
    if args.json:
        for line in export_lines(thread, messages):
            print(line, file=out)
        return 0
    print(f"thread   {thread.id}\nowner    {thread.owner}\ntitle    {thread.title or '-'}\n"
          f"created  {_when(thread.created_at)}\nupdated  {_when(thread.updated_at)}\n"
          f"expires  {_when(thread.expires_at)}\nturns    {thread.turns}", file=out)  # fmt: skip
    if thread.parent_id:
        print(f"fork of  {thread.parent_id} at seq {thread.fork_point} (depth {thread.depth})",
              file=out)  # fmt: skip
    for message in messages:
        label = f"[{message.seq}] turn {message.turn} {message.role}"
        if message.model:
            label += f" ({message.model})"
        print(f"\n{label}", file=out)
        provider = message.provider_message()
        content = provider.get("content")
        if content:
            print(content if isinstance(content, str) else json.dumps(content), file=out)
        for call in message.tool_calls or ():
            print(f"-> tool call {json.dumps(call, ensure_ascii=False)}", file=out)
    return 0


async def _export(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    if args.ids:
        threads = [await store.get_thread(tid, ANY_OWNER) for tid in args.ids]
    else:
        threads, offset = [], 0
        while page := await store.list_threads(ANY_OWNER, limit=500, offset=offset):
            threads.extend(page)
            offset += len(page)
    threads.sort(key=lambda t: (t.depth, t.created_at))
    target = args.output.open("w", encoding="utf-8") if args.output else out
    try:
        for thread in threads:
            for line in export_lines(thread, await store.messages(thread.id, ANY_OWNER)):
                target.write(line + "\n")
    finally:
        if args.output:
            target.close()
    print(f"exported {len(threads)} conversation(s)", file=sys.stderr)
    return 0


async def _import(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    if str(args.file) == "-":
        lines = sys.stdin.read().splitlines()
    else:
        lines = args.file.read_text(encoding="utf-8").splitlines()
    threads = parse_transcript(lines, owner=args.owner, now=time.time())
    present = await _ids_in_store(store)
    imported = skipped = 0
    for thread, messages in threads:
        if thread.id in present:
            print(f"skipped {thread.id} (already in the store)", file=out)
            skipped += 1
            continue
        restored = await store.import_thread(thread, messages)
        imported += 1
        print(f"imported {restored.id} ({len(messages)} messages, owner {restored.owner})",
              file=out)  # fmt: skip
    print(f"imported {imported}, skipped {skipped}", file=sys.stderr)
    return 0


async def _ids_in_store(store: ConversationStore) -> set[str]:
    """Every thread id the store holds, deleted and expired ones included (an import
    under one of them would collide)."""
    ids: set[str] = set()
    offset = 0
    while page := await store.list_threads(ANY_OWNER, include_deleted=True, limit=500,
                                           offset=offset):  # fmt: skip
        ids.update(thread.id for thread in page)
        offset += len(page)
    return ids


async def _rm(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    for thread_id in args.ids:
        await store.delete(thread_id, ANY_OWNER)
        print(f"deleted {thread_id}", file=out)
    print("deleted threads are erased by `exai conversations prune`", file=sys.stderr)
    return 0


async def _fork(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    fork = await store.fork(args.id, ANY_OWNER, at_seq=args.at)
    print(fork.id, file=out)
    return 0


async def _prune(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    print(f"pruned {await store.prune()} conversation(s)", file=out)
    return 0
