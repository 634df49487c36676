"""``exai serve``, ``exai config`` and ``exai token issue``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import sys

from exai.cli.numbers import number
from exai.settings import SettingsError, load_settings

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the daemon")
    p.add_argument("--host", help="override EXAI_WS_HOST")
    p.add_argument("--port", type=number(0, 65535, integer=True), help="override EXAI_WS_PORT")
    p.set_defaults(func=_serve)

    c = sub.add_parser("config", help="print the effective settings, secrets masked")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--example", action="store_true",
                   help="print .env.example: every setting with its default")  # fmt: skip
    c.set_defaults(func=_config)

    t = sub.add_parser("token", help="mint access tokens")
    tsub = t.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    issue = tsub.add_parser("issue", help="issue an HS256 JWT signed with EXAI_JWT_SECRET")
    issue.add_argument("--sub", required=True, help="the principal name")
    issue.add_argument("--scopes", nargs="*", help="tools the token may call (default: all)")
    issue.add_argument("--ttl", type=number(1, 10 * 366 * 86400), default=3600.0,
                       help="lifetime in seconds")  # fmt: skip
    issue.set_defaults(func=_token_issue)


def _load(**overrides: object):
    try:
        return load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:
        print(f"exai: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _serve(args: argparse.Namespace) -> int:
    settings = _load(ws_host=args.host, ws_port=args.port)
    from exai.app import App
    from exai.audit.scrub import log_scrubber, text_scrubber
    from exai.bridge import BridgeConfigError
    from exai.logs import configure_logging
    from exai.tracing import setup as tracing_setup

    configure_logging(settings.log_format, settings.log_level,
                      scrubber=log_scrubber(settings))  # fmt: skip
    tracing_setup.configure(settings, scrub=text_scrubber(settings))

    async def main() -> None:
        daemon = App(settings)
        try:
            await daemon.start()
        except (OSError, RuntimeError, BridgeConfigError) as exc:
            print(f"exai: cannot start: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
        _settle_heap()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await daemon.stop()

    try:
        asyncio.run(main())
    finally:
        tracing_setup.shutdown()  # what is queued goes out, bounded by the exporter's timeout
    return 0


def _settle_heap() -> None:
    """Keep the start-up heap out of the garbage collector's sight.

    What exists once the daemon has started (modules, pydantic schemas, the tool
    registry, SDK clients, some 150,000 objects) lives as long as the process, yet
    every full collection walked all of it: a fifth of the daemon's CPU time per
    call on the echo path. Freezing moves it to a generation that is never
    collected. The thresholds stay Python's own: raising them made the daemon
    keep more garbage after a storm of disconnects than the reliability suite
    allows.
    """
    gc.collect()
    gc.freeze()


def _config(args: argparse.Namespace) -> int:
    if args.example:
        from exai.settings import env_example

        print(env_example(), end="")
        return 0
    settings = _load()
    values = settings.masked()
    if args.json:
        print(json.dumps(values, indent=2, default=str))
    else:
        width = max(len(k) for k in values)
        for key, value in values.items():
            shown = ",".join(value) if isinstance(value, list) else value
            print(f"{key.ljust(width)}  {shown}")
    return 0


def _token_issue(args: argparse.Namespace) -> int:
    settings = _load()
    if settings.jwt_secret is None or not settings.jwt_secret.get_secret_value():
        print("exai: set EXAI_JWT_SECRET to issue tokens", file=sys.stderr)
        return 2
    from exai.auth import issue_token

    print(issue_token(settings.jwt_secret.get_secret_value(), args.sub, args.scopes, args.ttl))
    return 0
