"""``exai tools [TOOL]``: the tools the token may call, or one tool's arguments.

The list comes from the daemon's ``list_tools``, which offers a principal only
the tools its scopes allow, so what is listed here can be called with the same
token (``exai call``, MCP, ``/v1``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from exai.cli.arguments import describe_schema
from exai.cli.common import EXIT_FAILED, EXIT_USAGE, say
from exai.cli.connect import Target, explain, target

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("tools", help="list the tools this token may call, or one tool's arguments")
    t.add_argument("tool", nargs="?", help="show this tool's description and arguments")
    t.add_argument("--json", action="store_true", help="print the tools (or the tool) as JSON")
    t.add_argument("--url", help="daemon URL (default: ws://EXAI_WS_HOST:EXAI_WS_PORT)")
    t.add_argument("--token", help="token (default: EXAI_WS_TOKEN)")
    t.set_defaults(func=_tools)


def _tools(args: argparse.Namespace) -> int:
    return asyncio.run(_run(target(args), args))


async def _run(t: Target, args: argparse.Namespace) -> int:
    from exai.client import ClientError, ExaiClient

    try:
        async with ExaiClient(t.url, t.token, client_name="exai-cli") as client:
            tools = await client.list_tools()
    except ClientError as exc:
        say(*explain(exc, t))
        return EXIT_USAGE
    if args.tool is None:
        if args.json:
            print(json.dumps([tool.model_dump() for tool in tools], indent=2))
        else:
            _print_list(tools)
        return 0
    found = next((tool for tool in tools if tool.name == args.tool), None)
    if found is None:
        say(f"no tool {args.tool!r} for this token; it may call: "
            + ", ".join(tool.name for tool in tools))  # fmt: skip
        return EXIT_FAILED
    if args.json:
        print(json.dumps(found.model_dump(), indent=2))
        return 0
    print(f"{found.name}: {found.description}\n\narguments:")
    print("\n".join(describe_schema(dict(found.inputSchema))) or "  (none)")
    print(f"\nexample: exai call {found.name} {_example(dict(found.inputSchema))}".rstrip())
    return 0


def _print_list(tools: list[Any]) -> None:
    width = max((len(tool.name) for tool in tools), default=0) + 2
    for tool in tools:
        schema = dict(tool.inputSchema)
        required = list(schema.get("required") or ())
        optional = [n for n in (schema.get("properties") or {}) if n not in required]
        args = ", ".join([*(f"{n}*" for n in required), *optional])
        print(f"{tool.name.ljust(width)}{tool.description}")
        if args:
            print(f"{'':{width}}arguments: {args}")
    print(f"({len(tools)} tools; * required. `exai tools TOOL` describes one)", file=sys.stderr)


def _example(schema: dict[str, Any]) -> str:
    parts = []
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        kind = str((properties.get(name) or {}).get("type"))
        sample = {"string": '"..."', "integer": "1", "number": "1", "boolean": "true",
                  "array": "'[...]'", "object": "'{...}'"}.get(kind, "...")  # fmt: skip
        parts.append(f"{name}={sample}")
    return " ".join(parts)
