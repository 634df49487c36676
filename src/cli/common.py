"""What every ``exai`` subcommand shares: loading settings, and failing in one line.

A command that cannot go on prints ``exai: <what and why>`` on stderr, one line
per problem, and exits non-zero (2 for a usage or settings problem, 1 for a
failure of the thing asked for), never a traceback. A reader of stdout that goes
away is not a failure: :func:`exai.cli.main.main` ends every command the same
way then (141), so nothing here catches :class:`BrokenPipeError`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn

from exai.errors import ExaiError
from exai.settings import Settings, SettingsError, load_settings, misspelt, read_sources

__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "fail",
    "load_or_exit",
    "run_reported",
    "say",
    "warn_misspelt",
]

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


def run_reported(work: Coroutine[Any, Any, int]) -> int:
    """Run a command's coroutine, saying what stopped it in one ``exai:`` line.

    Exit 2 when what was given cannot be used (an invalid setting, or an argument the
    command refused with ``ValueError``: nothing was done); 1 when the thing asked
    for failed (:class:`~exai.errors.ExaiError`: a missing thread, a memory refused,
    a store that does not answer; or a file that cannot be read or written).
    """
    try:
        return asyncio.run(work)
    except BrokenPipeError:
        raise
    except SettingsError as exc:
        fail(*exc.problems)
    except ValueError as exc:
        say(_one_line(exc))
        return EXIT_USAGE
    except (ExaiError, OSError) as exc:
        say(_one_line(exc))
        return EXIT_FAILED


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc)
    return " ".join(text.split())
