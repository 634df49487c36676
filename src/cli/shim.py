"""``exai shim``: the MCP stdio server that IDE agents launch.

Logging is pointed at stderr before anything else happens: stdout carries the
MCP stream, and a single stray line there breaks the client.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shim", help="serve the daemon's tools over MCP on stdio (for IDEs)")
    p.add_argument("--url", help="daemon URL (default: ws://EXAI_WS_HOST:EXAI_WS_PORT)")
    p.add_argument("--token", help="token (default: EXAI_WS_TOKEN)")
    p.add_argument(
        "--autostart",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="start a local daemon if none is listening (default: EXAI_SHIM_AUTOSTART)",
    )
    p.set_defaults(func=_shim)


def _shim(args: argparse.Namespace) -> int:
    from exai.audit.scrub import log_scrubber
    from exai.logs import configure_logging

    configure_logging("console", "info", stream=sys.stderr, scrubber=log_scrubber())
    from exai.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"exai: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level, stream=sys.stderr,
                      scrubber=log_scrubber(settings))  # fmt: skip
    from exai.audit.scrub import text_scrubber
    from exai.shim import ShimOptions, run_shim
    from exai.subprocesses import worker_environment
    from exai.tracing import setup as tracing_setup

    # With an endpoint set the shim's own span joins the trace; without one the
    # client's trace context is still passed on to the daemon.
    try:
        tracing_setup.configure(settings, scrub=text_scrubber(settings),
                                environment=worker_environment())  # fmt: skip
    except ValueError as exc:  # an OpenTelemetry variable it would not apply
        print(f"exai: tracing: {exc}", file=sys.stderr)
        return 2
    options = ShimOptions.from_settings(settings, args.url, args.token, args.autostart)
    try:
        return run_shim(settings, options)
    except KeyboardInterrupt:
        return 130
    finally:
        tracing_setup.shutdown()
