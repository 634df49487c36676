""":class:`Settings`: every section's settings as one flat, typed object.

Each section of ``.env.example`` is a model of its own (``settings/daemon.py``,
``settings/tools.py``, ...); :class:`Settings` inherits them all, so the rest of
exai reads ``settings.ws_port`` or ``settings.jobs_tick_s`` from one object and
one environment. pydantic orders inherited fields from the last base to the
first, so the sections are listed here in reverse: ``.env.example`` (generated in
field order) keeps the daemon's section first and the model faces' last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from exai.redact import MASK, mask_url_credentials
from exai.settings.audit import AuditSettings
from exai.settings.conversations import ConversationsSettings
from exai.settings.daemon import DaemonSettings
from exai.settings.faces import FacesSettings
from exai.settings.fields import env_files
from exai.settings.jobs import JobsSettings
from exai.settings.memory import MemorySettings
from exai.settings.providers import ProvidersSettings
from exai.settings.shim import ShimSettings
from exai.settings.tools import ToolsSettings
from exai.settings.tracing import TracingSettings

__all__ = ["Settings", "env_name"]


class Settings(
    FacesSettings,
    TracingSettings,
    JobsSettings,
    MemorySettings,
    ShimSettings,
    AuditSettings,
    ConversationsSettings,
    ProvidersSettings,
    ToolsSettings,
    DaemonSettings,
    BaseSettings,
):
    model_config = SettingsConfigDict(
        env_prefix="EXAI_",
        # The user's file (~/.config/exai/env), then ./.env; the environment wins over both.
        env_file=env_files(),
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        # `EXAI_MODELS_FILE=` (as in .env.example) means "not set", not the path "".
        env_ignore_empty=True,
    )

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "conversations.sqlite3"

    @property
    def memory_sqlite_path(self) -> Path:
        return self.data_dir / "memory.sqlite3"

    @property
    def jobs_sqlite_path(self) -> Path:
        return self.data_dir / "jobs.sqlite3"

    @property
    def outbox_path(self) -> Path:
        return self.data_dir / "audit-outbox.sqlite3"

    def masked(self) -> dict[str, Any]:
        """Effective settings keyed by variable name, secrets and the credentials
        in URLs shown as ``****``."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = MASK if value.get_secret_value() else ""
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, str):
                value = mask_url_credentials(value)
            out[env_name(name)] = value
        return out


def env_name(field: str) -> str:
    """The environment variable of the setting ``field``."""
    info = Settings.model_fields[field]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"EXAI_{field.upper()}"
