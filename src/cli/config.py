"""``exai config`` (the effective settings, where they came from) and ``exai token issue``.

``exai config`` checks the settings as ``exai serve`` does (the values, and the
files and model names they point at; see :mod:`exai.cli.preflight`), so a
setting it accepts does not stop the daemon later, and warns as it does about a
variable that looks meant for exai but is ignored (:mod:`exai.settings.sources`).
``--changed`` shows only what differs from the defaults, and where each value
came from.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from exai.cli.common import EXIT_USAGE, fail, load_or_exit, say, warn_misspelt
from exai.cli.numbers import number
from exai.settings import SettingsError, changed, env_files, read_sources

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("config", help="check and print the effective settings, secrets masked",
                       description="Check the settings as `exai serve` does and print their "
                       "effective values, secrets masked. Settings come from the environment, "
                       "then ./.env, then ~/.config/exai/env; the first that sets a variable "
                       "wins.")  # fmt: skip
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--changed", action="store_true",
                   help="only the settings that differ from their defaults, and where each "
                   "value came from")  # fmt: skip
    c.add_argument("--example", action="store_true",
                   help="print .env.example: every setting with its default")  # fmt: skip
    c.add_argument("--reference", action="store_true",
                   help="print docs/settings.md: where settings come from, each one")  # fmt: skip
    c.set_defaults(func=_config)

    t = sub.add_parser("token", help="mint access tokens")
    tsub = t.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    issue = tsub.add_parser("issue", help="issue an HS256 JWT signed with EXAI_JWT_SECRET")
    issue.add_argument("--sub", required=True, help="the principal name")
    issue.add_argument("--scopes", nargs="*", help="tools the token may call (default: all)")
    issue.add_argument("--ttl", type=number(1, 10 * 366 * 86400), default=3600.0,
                       help="lifetime in seconds")  # fmt: skip
    for claim, what in (
        ("memory", "its model-face requests bring its memories"),
        ("sessions", "its model-face requests are kept as agent sessions"),
    ):
        issue.add_argument(f"--{claim}", choices=("on", "off"),
                           help=f"whether {what}, over the daemon's setting "
                           f"(EXAI_FACES_{claim.upper()})")  # fmt: skip
    issue.set_defaults(func=_token_issue)


def sources() -> list[str]:
    """Where settings are read from, in the order they win, each file marked found or not."""
    out = ["the environment"]
    for path in reversed(env_files()):
        shown = str(path) if path.is_absolute() else f"./{path}"
        out.append(f"{shown} ({'found' if Path(path).is_file() else 'not found'})")
    return out


def _config(args: argparse.Namespace) -> int:
    if args.example or args.reference:
        from exai.settings import env_example, settings_reference

        print(env_example() if args.example else settings_reference(), end="")
        return 0
    warn_misspelt()
    settings = load_or_exit()
    from exai.cli.preflight import check_settings

    try:
        undecided = check_settings(settings)
    except SettingsError as exc:
        fail(*exc.problems)
    for variable, name in undecided:
        say(f"{variable}: {name!r} is not in the catalogue; the daemon will look for it among "
            "the models the OpenAI-compatible server reports at start-up")  # fmt: skip
    print("settings from: " + ", then ".join(sources()), file=sys.stderr)
    if args.changed:
        return _print_changed(changed(settings, read_sources()), as_json=args.json)
    values = settings.masked()
    if args.json:
        print(json.dumps(values, indent=2, default=str))
    else:
        width = max(len(k) for k in values)
        for key, value in values.items():
            shown = ",".join(value) if isinstance(value, list) else value
            print(f"{key.ljust(width)}  {shown}")
    return 0


def _print_changed(rows: list[tuple[str, object, str]], *, as_json: bool) -> int:
    if as_json:
        print(json.dumps({name: {"value": value, "from": where} for name, value, where in rows},
                         indent=2, default=str))  # fmt: skip
        return 0
    shown = [(name, _as_written(value), where) for name, value, where in rows]
    width = max((len(name) for name, _, _ in shown), default=0)
    value_width = max((len(value) for _, value, _ in shown), default=0)
    for name, value, where in shown:
        print(f"{name.ljust(width)}  {value.ljust(value_width)}  from {where}")
    if not rows:
        say("every setting has its default")
    return 0


def _as_written(value: object) -> str:
    """A value as its variable would be written (``false``, ``a,b``)."""
    if isinstance(value, bool):
        return str(value).lower()
    return ",".join(value) if isinstance(value, list) else str(value)


def _token_issue(args: argparse.Namespace) -> int:
    settings = load_or_exit()
    if settings.jwt_secret is None or not settings.jwt_secret.get_secret_value():
        say("set EXAI_JWT_SECRET (at least 32 random bytes) to issue tokens, in the daemon's "
            "settings too: the daemon checks the tokens with it")  # fmt: skip
        return EXIT_USAGE
    from exai.auth import issue_token

    switch = {None: None, "on": True, "off": False}
    print(issue_token(settings.jwt_secret.get_secret_value(), args.sub, args.scopes, args.ttl,
                      memory=switch[args.memory], sessions=switch[args.sessions]))  # fmt: skip
    return 0
