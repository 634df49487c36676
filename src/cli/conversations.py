"""``exai conversations``: list, show, export, import, fork, rm and prune stored threads.

The commands act on the store ``EXAI_STORE_URL`` names, as the operator: they see
every principal's threads. ``list`` and ``export`` pick agent sessions (threads kept
from the model faces, see :mod:`exai.store.sessions`) by face and client, or leave
them out; ``show`` prints a thread as a transcript (:mod:`exai.cli.transcript_text`,
which escapes every control character a stored message holds). Export writes JSONL
(see :mod:`exai.store.transcript`), which ``import`` reads back, along with the plain
transcripts other tools write; a thread already in the store (by id, deleted or
not) is skipped and said so, so an export can be imported again into the store it
came from. ``rm`` deletes threads (their owners no longer see them) and ``prune``
erases what was deleted or expired.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from exai.auth import ANONYMOUS
from exai.cli.common import run_reported
from exai.cli.numbers import number
from exai.cli.transcript_text import (
    FACES,
    LIST_HEADING,
    face_name,
    header_lines,
    list_row,
    transcript_lines,
)
from exai.errors import ConversationNotFoundError
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
    _add_filters(p)
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_command(_list))

    p = sub.add_parser("show", help="one thread as a transcript, turn by turn")
    p.add_argument("id")
    p.add_argument("--reasoning", action="store_true", help="show the model's reasoning")
    p.add_argument("--system", action="store_true", help="show system prompts in full")
    p.add_argument("--json", action="store_true", help="print the thread as export JSONL")
    p.set_defaults(func=_command(_show))

    p = sub.add_parser("export", help="threads as JSONL (all live threads, or those the "
                       "filters pick, without IDs)")  # fmt: skip
    p.add_argument("ids", nargs="*", metavar="ID")
    _add_filters(p)
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


def _add_filters(p: argparse.ArgumentParser) -> None:
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--face", type=face_name, metavar="FACE",
                       help="agent sessions of one model face: " + ", ".join(
                           f"{name} ({path})" for name, path in FACES.items()))  # fmt: skip
    kinds.add_argument("--sessions", action="store_true", help="agent sessions only")
    kinds.add_argument("--threads", action="store_true", help="no agent sessions")
    p.add_argument("--client", metavar="TEXT",
                   help="agent sessions whose client's name holds TEXT (any case)")  # fmt: skip


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


def _filtered(args: argparse.Namespace) -> bool:
    return bool(args.face or args.sessions or args.threads or args.client)


async def _select(
    store: ConversationStore,
    args: argparse.Namespace,
    *,
    owner: str | None = None,
    include_deleted: bool = False,
    limit: int | None = None,
) -> list[Thread]:
    """The threads the filters pick, most recently active first, at most ``limit``:
    agent sessions by face and client, or the threads without a face (``--threads``)."""
    if args.threads and args.client:
        raise ValueError("--client picks agent sessions, and --threads leaves them out")
    agent = True if args.sessions else False if args.threads else None
    size = min(limit or 500, 500)
    threads: list[Thread] = []
    offset = 0
    while page := await store.list_threads(owner or ANY_OWNER, include_deleted=include_deleted,
                                           limit=size, offset=offset, agent=agent,
                                           face=args.face, client=args.client):  # fmt: skip
        offset += len(page)
        threads.extend(page)
        if limit is not None and len(threads) >= limit:
            return threads[:limit]
    return threads


async def _list(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    threads = await _select(store, args, owner=args.owner, include_deleted=args.deleted,
                            limit=args.limit)  # fmt: skip
    if args.json:
        for thread in threads:
            print(json.dumps(dataclasses.asdict(thread), ensure_ascii=False), file=out)
        return 0
    print(LIST_HEADING, file=out)
    for thread in threads:
        print(list_row(thread), file=out)
    return 0


async def _show(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    thread = await store.get_thread(args.id, ANY_OWNER)
    messages = await store.messages(thread.id, ANY_OWNER)
    if args.json:
        for line in export_lines(thread, messages):
            print(line, file=out)
        return 0
    costs = await store.turn_costs(thread.id, thread.owner)
    for line in header_lines(thread, costs):
        print(line, file=out)
    for line in transcript_lines(messages, costs, reasoning=args.reasoning, system=args.system):
        print(line, file=out)
    return 0


async def _export(store: ConversationStore, args: argparse.Namespace, out: TextIO) -> int:
    if args.ids and _filtered(args):
        raise ValueError("give IDs or filters (--face, --sessions, --threads, --client), not both")
    if args.ids:
        threads = [await store.get_thread(tid, ANY_OWNER) for tid in args.ids]
    else:
        threads = await _select(store, args)
        if _filtered(args):
            threads += await _parents(store, threads)
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


async def _parents(store: ConversationStore, threads: list[Thread]) -> list[Thread]:
    """The ancestors of the forks among ``threads`` that are not among them: an import
    needs a fork's parent first. A parent that is gone is said, and left out."""
    have = {thread.id for thread in threads}
    added: list[Thread] = []
    wanted = [t.parent_id for t in threads if t.parent_id]
    while wanted:
        parent_id = wanted.pop()
        if parent_id in have:
            continue
        have.add(parent_id)
        try:
            parent = await store.get_thread(parent_id, ANY_OWNER)
        except ConversationNotFoundError:
            print(f"parent {parent_id} is deleted or expired: its forks will not import "
                  "without it", file=sys.stderr)  # fmt: skip
            continue
        added.append(parent)
        if parent.parent_id:
            wanted.append(parent.parent_id)
    if added:
        print(f"with {len(added)} parent thread(s) the forks need", file=sys.stderr)
    return added


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
