"""Every setting exai reads, as one typed object.

Values come from the environment, then from ``.env`` in the working directory
(read through python-dotenv by pydantic-settings). Names are ``EXAI_*`` except
the provider and Supabase credentials, which keep the names their vendors use.
``.env.example`` documents each one; ``exai config`` prints the effective values
with secrets masked. An invalid value stops start-up with :class:`SettingsError`,
which names the variable and the problem.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["Settings", "SettingsError", "load_settings"]

CommaList = Annotated[list[str], NoDecode]


def _default_data_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "exai"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "exai"


def _alias(*names: str) -> Any:
    return AliasChoices(*names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="EXAI_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    # --- daemon -------------------------------------------------------------
    ws_host: str = "127.0.0.1"
    ws_port: int = Field(default=8079, ge=0, le=65535)
    ws_token: SecretStr | None = None
    ws_tokens: SecretStr | None = None  # "principal=token,principal2=token2"
    jwt_secret: SecretStr | None = None
    jwt_leeway_s: float = Field(default=30.0, ge=0)
    data_dir: Path = Field(default_factory=_default_data_dir)
    log_format: Literal["console", "json"] = "console"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    ws_compression: bool = False
    hello_timeout_s: float = Field(default=10.0, gt=0)
    max_frame_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_connections: int = Field(default=4096, ge=1)
    max_connections_per_ip: int = Field(default=2048, ge=1)
    max_inflight: int = Field(default=512, ge=1)
    max_inflight_per_session: int = Field(default=64, ge=1)
    queue_max: int = Field(default=1024, ge=0)
    queue_timeout_s: float = Field(default=10.0, ge=0)
    rate_limit_per_min: float = Field(default=1200.0, ge=0)  # 0 turns rate limiting off
    rate_limit_burst: int = Field(default=200, ge=1)
    default_timeout_s: float = Field(default=300.0, gt=0)
    max_timeout_s: float = Field(default=1800.0, gt=0)
    progress_interval_s: float = Field(default=10.0, gt=0)
    replay_window_s: float = Field(default=600.0, ge=0)
    replay_max_entries: int = Field(default=1000, ge=1)
    shutdown_grace_s: float = Field(default=30.0, ge=0)
    enable_echo: bool = True

    # --- tools --------------------------------------------------------------
    tool_profile: Literal["lean", "standard", "full"] = "standard"
    tools_allow: CommaList = Field(default_factory=list)
    tools_deny: CommaList = Field(default_factory=list)
    allowed_roots: CommaList = Field(default_factory=lambda: [str(Path.home())])
    max_result_tokens: int = Field(default=20000, ge=1000)
    max_provider_calls_per_request: int = Field(default=8, ge=1)

    # --- providers ----------------------------------------------------------
    kimi_api_key: SecretStr | None = Field(
        default=None, validation_alias=_alias("KIMI_API_KEY", "MOONSHOT_API_KEY")
    )
    kimi_base_url: str = Field(
        default="https://api.moonshot.ai/v1", validation_alias=_alias("KIMI_BASE_URL")
    )
    kimi_max_inflight: int = Field(default=64, ge=1)
    glm_api_key: SecretStr | None = Field(
        default=None, validation_alias=_alias("GLM_API_KEY", "ZAI_API_KEY", "ZHIPUAI_API_KEY")
    )
    glm_base_url: str = Field(
        default="https://api.z.ai/api/paas/v4", validation_alias=_alias("GLM_BASE_URL")
    )
    glm_max_inflight: int = Field(default=64, ge=1)
    openai_compat_base_url: str | None = None
    openai_compat_api_key: SecretStr | None = None
    openai_compat_models: CommaList = Field(default_factory=list)
    openai_compat_max_inflight: int = Field(default=16, ge=1)
    provider_timeout_s: float = Field(default=300.0, gt=0)
    provider_max_retries: int = Field(default=3, ge=0)
    default_model: str = "auto"
    fallback_models: CommaList = Field(default_factory=list)
    routing_rules: str = ""  # JSON list of {"when": {...}, "model": "..."}; see README
    models_file: Path | None = None
    stream_min_chunk_chars: int = Field(default=200, ge=1)
    stream_max_chunk_chars: int = Field(default=2000, ge=16)

    # --- conversations ------------------------------------------------------
    store_url: str | None = None  # sqlite:///path or postgresql://...; default: SQLite in data_dir
    conversation_ttl_s: float = Field(default=30 * 24 * 3600.0, gt=0)
    conversation_max_turns: int = Field(default=10000, ge=1)
    fork_max_depth: int = Field(default=10, ge=1)

    # --- audit --------------------------------------------------------------
    audit_enabled: bool = True
    audit_sink: Literal["none", "jsonl", "supabase", "postgres"] = "none"
    supabase_url: str | None = Field(default=None, validation_alias=_alias("SUPABASE_URL"))
    supabase_service_role_key: SecretStr | None = Field(
        default=None, validation_alias=_alias("SUPABASE_SERVICE_ROLE_KEY")
    )
    audit_postgres_url: SecretStr | None = None
    audit_jsonl_path: Path | None = None
    audit_batch_size: int = Field(default=500, ge=1)
    audit_flush_interval_s: float = Field(default=0.2, gt=0)
    audit_ship_interval_s: float = Field(default=1.0, gt=0)
    audit_max_outbox_events: int = Field(default=1_000_000, ge=1)

    # --- shim and bridge ----------------------------------------------------
    shim_autostart: bool = False
    shim_autostart_timeout_s: float = Field(default=20.0, gt=0)
    shim_connect_wait_s: float = Field(default=10.0, ge=0)  # a call waits this long for the daemon
    shim_tools_poll_s: float = Field(default=30.0, gt=0)  # how often tools/list_changed is checked
    mcp_servers_file: Path | None = None
    bridge_call_timeout_s: float = Field(default=120.0, gt=0)  # per server: "timeout_s"
    bridge_retry_max_s: float = Field(default=60.0, gt=0)  # longest wait between restarts
    bridge_health_interval_s: float = Field(default=15.0, gt=0)  # ping period of a live server

    @field_validator("tools_allow", "tools_deny", "allowed_roots", "openai_compat_models",
                     "fallback_models", mode="before")  # fmt: skip
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("allowed_roots")
    @classmethod
    def _roots_absolute(cls, value: list[str]) -> list[str]:
        for root in value:
            if not os.path.isabs(os.path.expanduser(root)):
                raise ValueError(f"{root!r} is not an absolute path")
        return [os.path.expanduser(root) for root in value]

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "conversations.sqlite3"

    @property
    def outbox_path(self) -> Path:
        return self.data_dir / "audit-outbox.sqlite3"

    def env_name(self, field: str) -> str:
        return env_name(field)

    def masked(self) -> dict[str, Any]:
        """Effective settings keyed by variable name, secrets shown as ``****``."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "****" if value.get_secret_value() else ""
            elif isinstance(value, Path):
                value = str(value)
            elif name in {"store_url"} and value:
                value = _mask_url(value)
            out[env_name(name)] = value
        return out


def env_name(field: str) -> str:
    info = Settings.model_fields[field]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"EXAI_{field.upper()}"


def _mask_url(url: str) -> str:
    # postgresql://user:password@host/db -> postgresql://user:****@host/db
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":****"
        return f"{scheme}://{creds}@{host}"
    return url


class SettingsError(Exception):
    """Start-up refused: a setting is invalid. The message names each variable."""


def load_settings(**overrides: Any) -> Settings:
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            field = str(err["loc"][0]) if err["loc"] else "?"
            name = env_name(field) if field in Settings.model_fields else field
            secret = field in Settings.model_fields and Settings.model_fields[field].annotation in (
                SecretStr,
                SecretStr | None,
            )
            shown = "" if secret else f" (got {err.get('input')!r})"
            problems.append(f"{name}: {err['msg']}{shown}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems)) from None
