"""``exai call TOOL [key=value ...] [--json '{...}']``: call one tool and print the result.

The answer goes to stdout; what a person needs besides it (the
``continuation_id`` and how to continue, a fallback model, files not read)
goes to stderr, so ``exai call ... > answer.md`` keeps only the answer. With
``--stream`` the chunks are printed as they arrive, and the final result when
no chunk came (a tool that does not stream). The CLI passes its working
directory as the call's root, as the shim does for an IDE's project, so files
of the directory it runs in can be read.

Ctrl-C (or the reader of stdout going away) cancels the call on the daemon
before exiting: nothing goes on running, and nothing more is billed.

Exit codes: 0 success, 1 a tool error, 2 a usage or connection problem, 130
interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from typing import Any

from exai.cli.arguments import parse_assignments
from exai.cli.common import EXIT_FAILED, EXIT_USAGE, say
from exai.cli.connect import Target, explain, target
from exai.cli.numbers import number

__all__ = ["register"]

_INTERRUPTED, _PIPE_CLOSED = 130, 141
_CANCEL_WAIT_S = 5.0

_DESCRIPTION = (
    "Call one tool and print its answer on stdout; the continuation_id, how to continue "
    "and other notes go to stderr. With --stream the answer is printed as it is written. "
    "Files in the working directory can be read (it is offered as a root, as the shim "
    "offers an IDE's project). Ctrl-C cancels the call on the daemon. Exit codes: 0 done, "
    "1 a tool error, 2 a usage or connection problem, 130 interrupted."
)
_VALUES_HELP = (
    'tool arguments; VALUE is read as JSON (3, true, ["/abs/a.py"], {...}) unless the '
    "tool's schema wants text there, and as text when it is not JSON: prompt=42 is the "
    'text "42". Quote for the shell: prompt="two words". `exai tools TOOL` lists them'
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("call", help="call a tool on a running daemon", description=_DESCRIPTION)
    p.add_argument("tool", help="tool name (`exai tools` lists them)")
    p.add_argument("args", nargs="*", metavar="key=value", help=_VALUES_HELP)
    p.add_argument("--json", dest="json_args", help="arguments as one JSON object")
    p.add_argument("--url", help="daemon URL (default: ws://EXAI_WS_HOST:EXAI_WS_PORT)")
    p.add_argument("--token", help="token (default: EXAI_WS_TOKEN)")
    p.add_argument("--timeout", type=number(0.001, 604800), help="deadline in seconds")
    p.add_argument("--stream", action="store_true", help="ask the tool to stream its answer")
    p.add_argument("--raw", action="store_true", help="print the call_tool_res frame as JSON")
    p.add_argument("--no-root", action="store_true",
                   help="do not offer the working directory as a root for files")  # fmt: skip
    p.set_defaults(func=_call)


def _call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.json_args) if args.json_args else {}
    except ValueError as exc:
        say(f"--json is not valid JSON: {exc}")
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        say("--json must be a JSON object of the tool's arguments")
        return EXIT_USAGE
    if any("=" not in pair or pair.startswith("=") for pair in args.args):
        bad = next(p for p in args.args if "=" not in p or p.startswith("="))
        say(f"expected key=value, got {bad!r} (`exai tools {args.tool}` lists the arguments)")
        return EXIT_USAGE
    return asyncio.run(_call_async(target(args), args, arguments))


class _Interrupt:
    """Why the call is being given up: Ctrl-C (130) or stdout closed (141)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.code = _INTERRUPTED
        self.count = 0

    def fire(self, code: int = _INTERRUPTED) -> None:
        self.count += 1
        self.code = code
        self.event.set()


async def _call_async(t: Target, args: argparse.Namespace, arguments: dict[str, Any]) -> int:
    from exai.client import ClientError, ExaiClient

    interrupt = _Interrupt()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, interrupt.fire)
    chunks = 0

    def on_chunk(chunk: Any) -> None:
        nonlocal chunks
        chunks += 1
        try:
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
        except BrokenPipeError:
            interrupt.fire(_PIPE_CLOSED)

    def on_progress(frame: Any) -> None:
        print(f"[progress] {frame.message}", file=sys.stderr)

    try:
        async with ExaiClient(t.url, t.token, client_name="exai-cli") as client:
            if args.args:
                arguments.update(parse_assignments(args.args, await _schema(client, args.tool)))
            rid = client.new_request_id()
            call = asyncio.ensure_future(client.call(
                args.tool, arguments, request_id=rid, timeout_s=args.timeout, stream=args.stream,
                on_chunk=on_chunk, on_progress=on_progress,
                roots=None if args.no_root else [os.getcwd()],
            ))  # fmt: skip
            stopped = asyncio.ensure_future(interrupt.event.wait())
            await asyncio.wait({call, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not call.done():
                return await _give_up(client, rid, call, interrupt, chunks)
            stopped.cancel()
            res = call.result()
    except ClientError as exc:
        say(*explain(exc, t))
        return EXIT_USAGE
    return _print_result(res, args, chunks)


async def _schema(client: Any, tool: str) -> dict[str, Any] | None:
    for info in await client.list_tools():
        if info.name == tool:
            return dict(info.inputSchema)
    return None  # the daemon's TOOL_NOT_FOUND will say which tools there are


async def _give_up(client: Any, rid: str, call: asyncio.Future[Any], interrupt: _Interrupt,
                   chunks: int) -> int:  # fmt: skip
    """Cancel the call on the daemon and wait (briefly) for its CANCELLED result."""
    if chunks and interrupt.code == _INTERRUPTED:
        print(file=sys.stdout, flush=True)
    if interrupt.code == _INTERRUPTED:
        say("cancelling the call (Ctrl-C again to leave at once)")
    interrupt.event.clear()
    with contextlib.suppress(Exception):
        await client.cancel(rid)
        again = asyncio.ensure_future(interrupt.event.wait())
        await asyncio.wait({call, again}, timeout=_CANCEL_WAIT_S,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        again.cancel()
    if call.done() and not call.cancelled() and call.exception() is None:
        res = call.result()
        if res.error is not None and res.error.code != "CANCELLED" and interrupt.code == 130:
            say(f"the call ended anyway: {res.error.code}: {res.error.message}")
    else:
        call.cancel()
    if interrupt.code == _INTERRUPTED:
        say("cancelled")
    return interrupt.code


def _print_result(res: Any, args: argparse.Namespace, chunks: int) -> int:
    if args.raw:
        print(res.model_dump_json(indent=2))
        return EXIT_FAILED if res.error is not None else 0
    if res.error is not None:
        print(f"error {res.error.code}: {res.error.message}", file=sys.stderr)
        if res.error.code == "TOOL_NOT_FOUND":
            print("(`exai tools` lists the tools this token may call)", file=sys.stderr)
        _notes(res.metadata.model_dump() if res.metadata else {})
        return EXIT_FAILED
    if chunks:
        print()
    else:
        for out in res.outputs:
            print(out.text)
    _notes(res.metadata.model_dump() if res.metadata else {})
    return 0


def _notes(metadata: dict[str, Any]) -> None:
    """What a person needs besides the answer, on stderr."""
    lines = []
    thread = metadata.get("continuation_id")
    if thread:
        tool = metadata.get("tool") or "chat"
        again = tool if "workflow" in metadata else "chat"
        lines.append(f"continuation_id: {thread}")
        lines.append(f"continue with: exai call {again} continuation_id={thread} prompt=\"...\""
                     if again == "chat" else
                     f"continue with: exai call {again} continuation_id={thread} --json "
                     "'{...the next step...}'")  # fmt: skip
    if metadata.get("fallback_from"):
        lines.append(f"answered by {metadata.get('model')} instead of {metadata['fallback_from']}")
    for skipped in metadata.get("files_skipped") or []:
        lines.append(f"file not read: {skipped.get('path')} ({skipped.get('reason')})")
    if lines:
        print("\n".join(lines), file=sys.stderr)
