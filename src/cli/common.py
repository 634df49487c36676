"""What every ``exai`` subcommand shares: loading settings, and failing in one line.

A command that cannot go on prints ``exai: <what and why>`` on stderr, one line
per problem, and exits non-zero (2 for a usage or settings problem, 1 for a
failure of the thing asked for), never a traceback.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from exai.settings import Settings, SettingsError, load_settings, misspelt, read_sources

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "fail", "load_or_exit", "say", "warn_misspelt"]

EXIT_FAILED, EXIT_USAGE = 1, 2


def say(*lines: str) -> None:
    """Print ``exai: <line>`` on stderr for each line."""
    for line in lines:
        print(f"exai: {line}", file=sys.stderr)


def fail(*lines: str, code: int = EXIT_USAGE) -> NoReturn:
    say(*lines)
    raise SystemExit(code)


def load_or_exit(**overrides: Any) -> Settings:
    """The settings, or exit 2 with one line per invalid setting."""
    try:
        return load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:
        fail(*exc.problems)


def warn_misspelt() -> None:
    """Warn, one line each, about variables meant for exai that it ignores (a misspelt
    name is otherwise silent: the setting keeps its default)."""
    say(*(f"warning: {line}" for line in misspelt(read_sources())))
