"""``exai``: the command line. Each subcommand lives in its own module here.

A module in ``COMMANDS`` exposes ``register(subparsers)``, which adds its parser
and sets ``func`` to a callable taking the parsed arguments and returning an exit
code. Settings are loaded lazily by the commands that need them, so a broken
``.env`` still lets ``exai --help`` run. A reader that goes away (``exai ... |
head``) ends the command quietly with 141, as SIGPIPE would, and Ctrl-C with 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from exai import __version__

__all__ = ["main"]

COMMANDS = [
    "exai.cli.serve",  # serve, stop
    "exai.cli.config",  # config, token
    "exai.cli.call",  # call
    "exai.cli.tools",  # tools
    "exai.cli.conversations",  # conversations ...
    "exai.cli.memory",  # memory ...
    "exai.cli.jobs",  # jobs ...
    "exai.cli.audit",  # audit ...
    "exai.cli.keys",  # keys ...
    "exai.cli.usage",  # usage
    "exai.cli.limits",  # limits ...
    "exai.cli.requests",  # requests
    "exai.cli.shim",  # shim
    "exai.cli.baseline",  # baseline
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="exai",
        description="Kimi and GLM tool daemon",
        epilog="Settings come from the environment, then ./.env, then ~/.config/exai/env; "
        "`exai config` checks and shows them. `exai COMMAND --help` describes a command.",
    )
    parser.add_argument("--version", action="version", version=f"exai {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # subcommand not built yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code = int(func(args) or 0)
        sys.stdout.flush()  # a reader gone before the last write is met here, not at exit
        return code
    except BrokenPipeError:
        # Whoever read stdout has what they wanted; flushing at exit must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
