"""``exai call TOOL [key=value ...] [--json '{...}']``: call one tool and print the result.

Values in ``key=value`` are parsed as JSON when they parse (numbers, booleans,
lists) and taken as strings otherwise. Streamed chunks are printed as they
arrive; the final result follows. The exit code is 0 on success, 1 on a tool
error, 2 on a usage or connection problem.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from exai.cli.numbers import number
from exai.settings import SettingsError, load_settings

__all__ = ["parse_assignments", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("call", help="call a tool on a running daemon")
    p.add_argument("tool", help="tool name (`exai tools` lists them)")
    p.add_argument("args", nargs="*", metavar="key=value", help="tool arguments")
    p.add_argument("--json", dest="json_args", help="arguments as one JSON object")
    p.add_argument("--url", help="daemon URL (default: ws://EXAI_WS_HOST:EXAI_WS_PORT)")
    p.add_argument("--token", help="token (default: EXAI_WS_TOKEN)")
    p.add_argument("--timeout", type=number(0.001, 604800), help="deadline in seconds")
    p.add_argument("--stream", action="store_true", help="ask the tool to stream its answer")
    p.add_argument("--raw", action="store_true", help="print the call_tool_res frame as JSON")
    p.set_defaults(func=_call)

    t = sub.add_parser("tools", help="list the daemon's tools")
    t.add_argument("--url")
    t.add_argument("--token")
    t.set_defaults(func=_tools)


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _target(args: argparse.Namespace) -> tuple[str, str | None]:
    try:
        s = load_settings()
    except SettingsError as exc:
        print(f"exai: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    url = args.url or f"ws://{s.ws_host}:{s.ws_port}"
    token = args.token or (s.ws_token.get_secret_value() if s.ws_token else None)
    return url, token


def _call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.json_args) if args.json_args else {}
        arguments.update(parse_assignments(args.args))
    except ValueError as exc:
        print(f"exai: {exc}", file=sys.stderr)
        return 2
    url, token = _target(args)
    return asyncio.run(_call_async(url, token, args, arguments))


async def _call_async(url: str, token: str | None, args: argparse.Namespace,
                      arguments: dict[str, Any]) -> int:  # fmt: skip
    from exai.client import ClientError, ExaiClient

    def on_chunk(chunk: Any) -> None:
        sys.stdout.write(chunk.text)
        sys.stdout.flush()

    def on_progress(frame: Any) -> None:
        print(f"[progress] {frame.message}", file=sys.stderr)

    try:
        async with ExaiClient(url, token, client_name="exai-cli") as client:
            res = await client.call(args.tool, arguments, timeout_s=args.timeout,
                                    stream=args.stream, on_chunk=on_chunk,
                                    on_progress=on_progress)  # fmt: skip
    except ClientError as exc:
        print(f"exai: {exc}", file=sys.stderr)
        return 2
    if args.raw:
        print(res.model_dump_json(indent=2))
    elif res.error is not None:
        print(f"error {res.error.code}: {res.error.message}", file=sys.stderr)
    else:
        if args.stream:
            print()
        else:
            for out in res.outputs:
                print(out.text)
    return 1 if res.error is not None else 0


def _tools(args: argparse.Namespace) -> int:
    url, token = _target(args)

    async def run() -> int:
        from exai.client import ClientError, ExaiClient

        try:
            async with ExaiClient(url, token, client_name="exai-cli") as client:
                for tool in await client.list_tools():
                    print(f"{tool.name:16} {tool.description}")
        except ClientError as exc:
            print(f"exai: {exc}", file=sys.stderr)
            return 2
        return 0

    return asyncio.run(run())
