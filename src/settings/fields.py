"""How a setting is declared: its section of ``.env.example``, list values, defaults.

Every section module declares its settings with the factory of its heading
(:func:`group`), so ``.env.example`` can be generated with one heading per
section; list settings are :data:`CommaList`, read from one comma-separated
variable.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_settings import NoDecode

__all__ = ["CommaList", "default_data_dir", "env_files", "group", "list_field", "user_env_file"]


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# A list read from one variable, "a, b,c" -> ["a", "b", "c"] (NoDecode: not as JSON).
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_split_commas)]


def group(name: str) -> Any:
    """A ``Field`` factory that files each setting under the heading ``name``."""

    def field(default: Any, description: str, **kw: Any) -> Any:
        return Field(default, description=description, json_schema_extra={"group": name}, **kw)

    return field


def list_field(group_name: str, description: str, **kw: Any) -> Any:
    """A :data:`CommaList` setting under ``group_name``, empty unless ``default_factory``
    says otherwise."""
    kw.setdefault("default_factory", list)
    return Field(description=description, json_schema_extra={"group": group_name}, **kw)


def default_data_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "exai"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "exai"


def user_env_file() -> Path:
    """The user's settings file, read wherever exai runs: ``$XDG_CONFIG_HOME/exai/env``
    (``~/.config/exai/env``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "exai" / "env"


def env_files() -> tuple[Path, Path]:
    """The files settings are read from, the later winning: the user's file, then
    ``.env`` in the working directory. The environment wins over both."""
    return user_env_file(), Path(".env")
