"""Where each setting's value came from, and the names that look like settings but are not.

pydantic-settings reads the environment, ``./.env`` and the user's file
(:func:`~exai.settings.fields.env_files`) and keeps no record of which one gave a
value; it also ignores any name it does not know, so ``EXAI_WS_PROT=9000`` or
``KIMI_APIKEY=sk-...`` change nothing and say nothing. This module reads the same
three places with the same dotenv parser, under the same rules (names in any case,
an empty value as unset, the environment winning over ``.env`` and ``.env`` over
the user's file), so that :func:`origin` can say where a value came from and
:func:`misspelt` can name a variable that is ignored and the setting it was
probably meant to be (:mod:`difflib`).
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dotenv import dotenv_values
from pydantic import AliasChoices, SecretStr

from exai.settings.fields import env_files
from exai.settings.model import Settings, env_name

__all__ = ["Source", "changed", "misspelt", "origin", "read_sources", "variables"]

ENVIRONMENT = "the environment"

# The vendors' own prefixes: a name under one of them that is close to a real one
# (KIMI_APIKEY, GLM_API_TOKEN) is a near miss; others (GLM_HOME) are someone else's.
_VENDOR_PREFIXES = ("KIMI_", "MOONSHOT_", "GLM_", "ZAI_", "ZHIPUAI_")
# The knobs of this repository's own test and benchmark scripts, which exai never reads.
_NOT_SETTINGS = ("EXAI_BENCH_", "EXAI_RELIABILITY_", "EXAI_TEST_")
_EXAI_CUTOFF, _VENDOR_CUTOFF = 0.6, 0.65


@dataclass(frozen=True)
class Source:
    """One place settings are read from: ``label`` (``the environment``, or a file's
    path) and the variables it sets, names upper-cased, empty values left out."""

    label: str
    values: Mapping[str, str]


def read_sources(environ: Mapping[str, str] | None = None) -> list[Source]:
    """The environment, ``./.env`` and the user's file, in the order they win; a file
    that does not exist is an empty source."""
    found = [Source(ENVIRONMENT, _present(os.environ if environ is None else environ))]
    for path in reversed(env_files()):
        values: Mapping[str, str | None] = {}
        # A file that cannot be read is for load_settings to report, not for this.
        with contextlib.suppress(OSError, UnicodeDecodeError):
            values = dotenv_values(path, encoding="utf-8") if path.is_file() else {}
        found.append(Source(str(path.absolute()), _present(values)))
    return found


def _present(values: Mapping[str, str | None]) -> dict[str, str]:
    return {name.upper(): value for name, value in values.items() if value}


def variables(field: str) -> tuple[str, ...]:
    """The names the setting ``field`` is read under, the preferred one first."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(choice).upper() for choice in alias.choices)
    return (env_name(field),)


def origin(field: str, sources: list[Source]) -> tuple[str, str] | None:
    """``(source label, variable)`` that gave ``field`` its value; None: its default."""
    for source in sources:
        for name in variables(field):
            if name in source.values:
                return source.label, name
    return None


def changed(settings: Settings, sources: list[Source]) -> list[tuple[str, Any, str]]:
    """The settings a source sets to something other than their default, as
    ``(variable, value with secrets masked, where it came from)``."""
    masked = settings.masked()
    out = []
    for field, info in Settings.model_fields.items():
        found = origin(field, sources)
        if found is None:
            continue
        default = info.get_default(call_default_factory=True)
        if _plain(getattr(settings, field)) == _plain(default):
            continue
        label, name = found
        where = label if name == env_name(field) else f"{label}, as {name}"
        out.append((env_name(field), masked[env_name(field)], where))
    return out


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _known() -> set[str]:
    return {name for field in Settings.model_fields for name in variables(field)}


def misspelt(sources: list[Source]) -> list[str]:
    """One line per variable that looks meant for exai but is not a setting: any
    ``EXAI_`` name exai does not read, and a vendor name close to a key's name; each
    says where it was set and, when one is close, which setting it may have meant."""
    known = _known()
    # EXAI_ names are compared without the prefix they share, which would make any
    # two of them look alike; EXAI_KIMI_API_KEY is then close to KIMI_API_KEY.
    stems = {name.removeprefix("EXAI_"): name for name in known}
    vendor = [name for name in known if name.startswith(_VENDOR_PREFIXES)]
    lines = []
    for source in sources:
        for name in source.values:
            if name in known or name.startswith(_NOT_SETTINGS):
                continue
            if name.startswith("EXAI_"):
                close = difflib.get_close_matches(name.removeprefix("EXAI_"), list(stems), 1,
                                                  _EXAI_CUTOFF)  # fmt: skip
                guess = stems[close[0]] if close else None
            elif name.startswith(_VENDOR_PREFIXES):
                close = difflib.get_close_matches(name, vendor, 1, _VENDOR_CUTOFF)
                if not close:
                    continue
                guess = close[0]
            else:
                continue
            where = "set in the environment" if source.label == ENVIRONMENT else \
                f"set in {source.label}"  # fmt: skip
            line = f"{name} ({where}) is not an exai setting and is ignored"
            lines.append(f"{line}; did you mean {guess}?" if guess else
                         f"{line}; `exai config --example` lists them")  # fmt: skip
    return lines
