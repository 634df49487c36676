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

from exai.redact import MASK, mask_url_credentials

__all__ = ["Settings", "SettingsError", "env_example", "env_name", "load_settings"]

CommaList = Annotated[list[str], NoDecode]


def _default_data_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "exai"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "exai"


def _group(group: str) -> Any:
    """A ``Field`` factory that files each setting under a heading of ``.env.example``."""

    def field(default: Any, description: str, **kw: Any) -> Any:
        return Field(default, description=description, json_schema_extra={"group": group}, **kw)

    return field


_daemon = _group("daemon")
_tools = _group("tools")
_providers = _group("providers")
_conversations = _group("conversations")
_audit = _group("audit")
_shim = _group("shim and bridge")
_memory = _group("memory")
_jobs = _group("jobs")


def _tools_list(description: str) -> Any:
    return Field(
        default_factory=list, description=description, json_schema_extra={"group": "tools"}
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="EXAI_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        # `EXAI_MODELS_FILE=` (as in .env.example) means "not set", not the path "".
        env_ignore_empty=True,
    )

    # --- daemon -------------------------------------------------------------
    ws_host: str = _daemon(
        "127.0.0.1", "Address to listen on; anything but loopback needs a token."
    )
    ws_port: int = _daemon(8079, "Port for WebSocket and HTTP (/health, /ready, /metrics).",
                           ge=0, le=65535)  # fmt: skip
    http_port: int | None = _daemon(
        8078,
        "Port for the HTTP faces (MCP at /mcp, OpenAI-compatible /v1) on EXAI_WS_HOST; "
        "empty turns them off.",
        ge=0,
        le=65535,
    )
    allowed_origins: CommaList = Field(
        default_factory=list,
        description="Web origins allowed to reach the daemon from a browser, over "
        "WebSocket and HTTP, comma-separated (e.g. https://app.example.com). A request that "
        "carries any other Origin header is refused.",
        json_schema_extra={"group": "daemon"},
    )
    ws_token: SecretStr | None = _daemon(None, "Token for the principal 'default'.")
    ws_tokens: SecretStr | None = _daemon(
        None, "More tokens, each naming its principal: alice=token1,bob=token2."
    )
    jwt_secret: SecretStr | None = _daemon(
        None, "HS256 secret; JWTs with sub, exp (nbf, scopes optional) are accepted as tokens."
    )
    jwt_leeway_s: float = _daemon(30.0, "Clock skew allowed when checking exp and nbf.", ge=0)
    budgets: str = _daemon(
        "", "Spending budgets per principal and UTC day or month, e.g. "
        "alice=5 USD/day,*=100 USD/month (* is every principal without its own; a JWT's "
        "exai_budget claim {amount, currency, period} wins). Over budget, calls are refused "
        "with BUDGET_EXCEEDED before any provider request. Empty: no budgets.",
    )  # fmt: skip
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the SQLite files live (conversations, audit outbox). "
        "Default: ~/.local/share/exai ($XDG_DATA_HOME/exai).",
        json_schema_extra={"group": "daemon"},
    )
    log_format: Literal["console", "json"] = _daemon("console", "Log lines for people or machines.")
    log_level: Literal["debug", "info", "warning", "error"] = _daemon(
        "info", "Lowest level logged."
    )
    ws_compression: bool = _daemon(False, "Per-message deflate; costs CPU, saves bandwidth.")
    hello_timeout_s: float = _daemon(10.0, "A connection must say hello within this.", gt=0)
    max_frame_bytes: int = _daemon(32 * 1024 * 1024, "Largest frame accepted.", ge=1024)
    hello_max_bytes: int = _daemon(
        16 * 1024, "Largest frame accepted before a hello has succeeded (the hello, with its "
        "token); a larger one closes the connection with 1009.", ge=1024,
    )  # fmt: skip
    max_connections: int = _daemon(4096, "Open connections, in total.", ge=1)
    max_connections_per_ip: int = _daemon(2048, "Open connections from one address.", ge=1)
    max_unauthenticated_per_ip: int = _daemon(
        256, "Connections from one address (an IPv6 /64) that have not said a valid hello yet; "
        "beyond this the upgrade is refused with HTTP 429.", ge=1,
    )  # fmt: skip
    auth_failures_per_min: float = _daemon(
        30.0, "Failed hellos an address may make per minute once its burst is spent; while it "
        "is over, its hellos are refused (RATE_LIMITED, 4003) unchecked. 0: no limit.", ge=0,
    )  # fmt: skip
    auth_failures_burst: int = _daemon(
        30, "Failed hellos an address may make in a row before the per-minute limit applies.",
        ge=1,
    )  # fmt: skip
    max_inflight: int = _daemon(512, "Tool calls running at once, in total.", ge=1)
    max_inflight_per_session: int = _daemon(64, "Tool calls running at once per session.", ge=1)
    queue_max: int = _daemon(1024, "Calls that may wait for capacity before OVER_CAPACITY.", ge=0)
    queue_timeout_s: float = _daemon(10.0, "Longest wait for capacity.", ge=0)
    rate_limit_per_min: float = _daemon(
        1200.0, "Calls per principal per minute; 0: no limit.", ge=0
    )
    rate_limit_burst: int = _daemon(200, "Calls a principal may make at once before the rate "
                                    "limit applies.", ge=1)  # fmt: skip
    default_timeout_s: float = _daemon(300.0, "Deadline of a call that asks for none.", gt=0)
    max_timeout_s: float = _daemon(1800.0, "Longest deadline a call may ask for.", gt=0)
    progress_interval_s: float = _daemon(
        10.0, "Heartbeat progress frames for running calls, this often.", gt=0
    )
    replay_window_s: float = _daemon(
        600.0,
        "How long a finished call's result is kept for a retry with the same request_id.",
        ge=0,
    )
    replay_max_entries: int = _daemon(1000, "Results kept for replay, per session.", ge=1)
    replay_max_bytes: int = _daemon(
        64 * 1024 * 1024,
        "Bytes of results kept for replay across all sessions; the oldest go first.",
        ge=0,
    )
    shutdown_grace_s: float = _daemon(30.0, "On SIGTERM, how long running calls may finish.", ge=0)
    cluster_sync_s: float = _daemon(
        0.1, "With a Postgres store: how often a daemon writes new sessions and finished "
        "results there and adds its calls to the shared rate counts (never on a call's path).",
        gt=0,
    )  # fmt: skip
    cluster_rate_window_s: float = _daemon(
        60.0, "With a Postgres store: the window in which a principal's calls are counted "
        "across daemons (EXAI_RATE_LIMIT_PER_MIN scaled to it).", ge=1,
    )  # fmt: skip
    enable_echo: bool = _daemon(True, "Offer the echo tool (load tests, connectivity checks).")

    # --- tools --------------------------------------------------------------
    tool_profile: Literal["lean", "standard", "full"] = _tools(
        "standard", "Which tools are offered; see docs/toolsets.md."
    )
    tools_allow: CommaList = _tools_list("Tools offered whatever the profile, comma-separated.")
    tools_deny: CommaList = _tools_list("Tools never offered, comma-separated.")
    allowed_roots: CommaList = Field(
        default_factory=lambda: [str(Path.home())],
        description="Absolute directories whose files tools may read, comma-separated. "
        "Default: your home directory, and on a loopback daemon the calling IDE's project "
        "roots too. When set, a ceiling that the IDE's roots can only narrow.",
        json_schema_extra={"group": "tools"},
    )
    max_result_tokens: int = _tools(
        20000, "Larger results are stored as artifacts and returned in pages.", ge=1000
    )
    max_provider_calls_per_request: int = _tools(8, "Model calls one tool call may make.", ge=1)
    max_upload_bytes: int = _tools(
        20_000_000,
        "Largest document (PDF, Office) or image sent to a model that can read it; a larger "
        "one is skipped with the reason. The vendor's own limit applies too.",
        ge=1,
    )

    # --- providers ----------------------------------------------------------
    kimi_api_key: SecretStr | None = _providers(
        None, "Moonshot API key (MOONSHOT_API_KEY also works).",
        validation_alias=AliasChoices("KIMI_API_KEY", "MOONSHOT_API_KEY"),
    )  # fmt: skip
    kimi_base_url: str = _providers(
        "https://api.moonshot.ai/v1", "Moonshot endpoint; https://api.moonshot.cn/v1 works too.",
        validation_alias=AliasChoices("KIMI_BASE_URL"),
    )  # fmt: skip
    kimi_max_inflight: int = _providers(64, "Kimi requests at once.", ge=1)
    glm_api_key: SecretStr | None = _providers(
        None, "Z.ai / Zhipu API key (ZAI_API_KEY and ZHIPUAI_API_KEY also work).",
        validation_alias=AliasChoices("GLM_API_KEY", "ZAI_API_KEY", "ZHIPUAI_API_KEY"),
    )  # fmt: skip
    glm_base_url: str = _providers(
        "https://api.z.ai/api/paas/v4",
        "GLM endpoint; https://open.bigmodel.cn/api/paas/v4 selects the mainland client.",
        validation_alias=AliasChoices("GLM_BASE_URL"),
    )
    glm_max_inflight: int = _providers(64, "GLM requests at once (its thread pool's size).", ge=1)
    openai_compat_base_url: str | None = _providers(
        None, "Any OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp, OpenRouter)."
    )
    openai_compat_api_key: SecretStr | None = _providers(None, "Its key, if it needs one.")
    openai_compat_models: CommaList = Field(
        default_factory=list,
        description="Its models, comma-separated; empty: discovered from /v1/models.",
        json_schema_extra={"group": "providers"},
    )
    openai_compat_max_inflight: int = _providers(16, "Its requests at once.", ge=1)
    provider_timeout_s: float = _providers(300.0, "Timeout of one provider request.", gt=0)
    provider_max_retries: int = _providers(
        3, "Retries of 429, 5xx and connection errors (never 400/401), honouring Retry-After.",
        ge=0,
    )  # fmt: skip
    default_model: str = _providers("auto", "Model used when a call names none.")
    fallback_models: CommaList = Field(
        default_factory=list,
        description="Models to try, in order, when the chosen one is down or rate limited.",
        json_schema_extra={"group": "providers"},
    )
    routing_rules: str = _providers(
        "", 'Ordered rules for model "auto", as JSON: '
        '[{"when": {"sensitive": true}, "model": "local-llama"}]; see README.',
    )  # fmt: skip
    models_file: Path | None = _providers(
        None, "A TOML file adding to or overriding the model catalogue."
    )
    stream_min_chunk_chars: int = _providers(200, "Smallest streamed chunk.", ge=1)
    stream_max_chunk_chars: int = _providers(
        2000, "Largest streamed chunk (a code block is never cut).", ge=16
    )

    # --- conversations ------------------------------------------------------
    store_url: str | None = _conversations(
        None, "sqlite:///path or postgresql://user:pass@host/db (a Supabase connection string "
        "works); empty: SQLite in EXAI_DATA_DIR.",
    )  # fmt: skip
    conversation_ttl_s: float = _conversations(
        30 * 24 * 3600.0, "A conversation expires this long after its last turn.", gt=0
    )
    conversation_max_turns: int = _conversations(10000, "Turns one conversation may hold.", ge=1)
    fork_max_depth: int = _conversations(10, "How deeply forks may nest.", ge=1)
    history_low_water: float = _conversations(
        0.5, "When a thread outgrows the model's window, old turns are dropped until the "
        "history fills this fraction of the room, so that later turns reuse the cached "
        "prompt prefix (1: one turn at a time).", gt=0, le=1,
    )  # fmt: skip

    # --- audit --------------------------------------------------------------
    audit_enabled: bool = _audit(True, "Record the audit trail.")
    audit_sink: Literal["none", "jsonl", "supabase", "postgres"] = _audit(
        "none", "Where the outbox ships events; none keeps them in the local outbox only."
    )
    supabase_url: str | None = _audit(
        None, "Supabase project URL.", validation_alias=AliasChoices("SUPABASE_URL")
    )
    supabase_service_role_key: SecretStr | None = _audit(
        None, "Supabase service role key.",
        validation_alias=AliasChoices("SUPABASE_SERVICE_ROLE_KEY"),
    )  # fmt: skip
    audit_postgres_url: SecretStr | None = _audit(None, "Postgres URL for the postgres sink.")
    audit_jsonl_path: Path | None = _audit(
        None, "File for the jsonl sink; default: audit.jsonl in EXAI_DATA_DIR."
    )
    audit_batch_size: int = _audit(500, "Events per shipped batch.", ge=1)
    audit_flush_interval_s: float = _audit(0.2, "Memory to outbox, this often.", gt=0)
    audit_ship_interval_s: float = _audit(1.0, "Outbox to sink, this often.", gt=0)
    audit_max_outbox_events: int = _audit(
        1_000_000, "Undelivered events kept; beyond this new events are dropped and counted.",
        ge=1,
    )  # fmt: skip
    audit_writer_nice: int = _audit(
        10, "CPU priority the audit writer process gives up (a nice increment, 0-19): when "
        "calls and the writer want the same core, calls get it and the writer catches up "
        "after. 0: the writer competes as an equal.", ge=0, le=19,
    )  # fmt: skip

    # --- shim and bridge ----------------------------------------------------
    shim_autostart: bool = _shim(
        False, "exai shim starts a daemon when none listens (one per machine)."
    )
    shim_autostart_timeout_s: float = _shim(
        20.0, "How long the shim waits for the daemon it started.", gt=0
    )
    shim_connect_wait_s: float = _shim(
        10.0, "How long an MCP call waits for the daemon before a clear error.", ge=0
    )
    shim_tools_poll_s: float = _shim(
        30.0, "How often the shim checks the daemon's tools for tools/list_changed.", gt=0
    )
    mcp_servers_file: Path | None = _shim(
        None, "External MCP servers (Claude Desktop format); their tools appear as server__tool."
    )
    bridge_call_timeout_s: float = _shim(
        120.0, "Timeout of a bridged tool call; a server's timeout_s overrides it.", gt=0
    )
    bridge_retry_max_s: float = _shim(60.0, "Longest wait between restarts of a failed server.",
                                      gt=0)  # fmt: skip
    bridge_health_interval_s: float = _shim(15.0, "How often a live server is pinged.", gt=0)

    memory_enabled: bool = _memory(True, "Long-term memory: the remember, recall and forget "
                                   "tools, and memories injected into new threads.")  # fmt: skip
    memory_url: str | None = _memory(
        None,
        "Where memories live: sqlite:///path or postgresql://... (default: "
        "memory.sqlite3 in EXAI_DATA_DIR, or the conversation store's Postgres).",
    )
    memory_inject: bool = _memory(True, "Add relevant memories to a new thread's system prompt "
                                  "(a call can turn it off with use_memory=false).")  # fmt: skip
    memory_max_results: int = _memory(10, "Most memories one recall or injection returns.",
                                      ge=1, le=100)  # fmt: skip
    memory_min_similarity: float = _memory(
        0.7, "Vector hits less similar than this (cosine) are left out.", ge=-1, le=1
    )
    memory_token_budget: int = _memory(500, "Most tokens the injected memory block may use.",
                                       ge=50)  # fmt: skip
    memory_type_weights: str = _memory(
        "rule=1.5,decision=1.3,preference=1.2", "Ranking weight per memory type (others 1.0)."
    )
    memory_recency_half_life_days: float = _memory(
        90.0, "Age at which a memory's recency weight is halfway to its floor (0: off).", ge=0
    )
    memory_dedup_similarity: float = _memory(
        0.95,
        "A new memory at least this similar to one stored replaces it (may need tuning "
        "per embedding model; above 1 turns it off).",
        ge=0,
        le=1.01,
    )
    memory_embedding_providers: CommaList = Field(
        default_factory=list,
        description="Embedding plugins to use, in order of preference (glm, openai_compat); "
        "empty: vectors off, keyword retrieval only.",
        json_schema_extra={"group": "memory"},
    )
    memory_glm_embedding_model: str = _memory("embedding-3", "GLM embedding model.")
    memory_embedding_dimensions: int | None = _memory(
        1024, "Vector size asked of the embedding model (empty: the model's own).", ge=1
    )
    memory_openai_embedding_base_url: str | None = _memory(
        None, "An OpenAI-compatible embeddings API, e.g. http://127.0.0.1:11434/v1 (Ollama)."
    )
    memory_openai_embedding_api_key: SecretStr | None = _memory(None, "Its key, if it needs one.")
    memory_openai_embedding_model: str = _memory("text-embedding-3-small", "Its model.")
    memory_embedding_batch_size: int = _memory(64, "Texts per embedding request.", ge=1)
    memory_embedding_cooldown_s: float = _memory(
        60.0, "How long a rate-limited or failing embedding provider is skipped.", ge=0
    )
    memory_sqlite_vec: bool = _memory(True, "Search SQLite vectors with sqlite-vec (false: "
                                      "a scan in Python).")  # fmt: skip
    memory_pgvector: bool = _memory(True, "Use pgvector on Postgres when it can be created "
                                    "(false: a scan in Python).")  # fmt: skip
    memory_extraction_enabled: bool = _memory(
        False,
        "After each turn, a background worker asks a cheap model for memories in the "
        "user's message.",
    )
    memory_extraction_model: str = _memory("glm-4.5-flash", "The model extraction asks.")
    memory_extraction_max_attempts: int = _memory(3, "Attempts per queued message.", ge=1)
    jobs_enabled: bool = _jobs(
        True,
        "Scheduled jobs: the daemon ticks and runs due jobs; the "
        "schedule, jobs and unschedule tools.",
    )
    jobs_url: str | None = _jobs(
        None,
        "Where jobs are stored: sqlite:///path or postgresql://... Unset: jobs.sqlite3 in "
        "the data directory, or the conversation store's Postgres when EXAI_STORE_URL is one.",
    )
    jobs_tick_s: float = _jobs(1.0, "Seconds between two ticks of the scheduler.", gt=0)
    jobs_lease_s: float = _jobs(
        60.0,
        "A running job's lease: renewed while it runs; a run whose lease passed (its "
        "daemon died) is taken up again.",
        gt=0,
    )
    jobs_batch: int = _jobs(10, "Most runs one daemon starts per tick.", ge=1)
    jobs_misfire_grace_s: float = _jobs(
        60.0, "A fire later than this is a missed fire, handled by the job's missed policy.", ge=0
    )
    jobs_min_interval_s: float = _jobs(60.0, "Shortest interval schedule accepted.", gt=0)
    jobs_max_per_principal: int = _jobs(100, "Most jobs one principal may have.", ge=1)
    jobs_webhook_secret: SecretStr | None = _jobs(
        None,
        "Key of the HMAC-SHA256 signature (X-Exai-Signature) on webhook notifications.",
    )
    jobs_notify_attempts: int = _jobs(
        5, "Tries per notification before it is kept as undeliverable.", ge=1
    )
    jobs_notify_timeout_s: float = _jobs(10.0, "Timeout of one notification request.", gt=0)
    jobs_notify_hosts: CommaList = Field(
        default_factory=list,
        description="Hosts a job's notification URL may name, comma-separated (ntfy.sh,"
        "hooks.example.com); empty: any host. Any principal may schedule a job, so on a "
        "shared daemon this keeps its notifications from reaching internal services.",
        json_schema_extra={"group": "jobs"},
    )

    @field_validator("memory_type_weights")
    @classmethod
    def _type_weights(cls, value: str) -> str:
        from exai.memory.ranking import parse_type_weights

        parse_type_weights(value)
        return value

    @field_validator("tools_allow", "tools_deny", "allowed_roots", "openai_compat_models",
                     "fallback_models", "allowed_origins", "memory_embedding_providers",
                     "jobs_notify_hosts", mode="before")  # fmt: skip
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("budgets")
    @classmethod
    def _budgets_valid(cls, value: str) -> str:
        from exai.accounting.budgets import parse_budgets

        parse_budgets(value)
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
    info = Settings.model_fields[field]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"EXAI_{field.upper()}"


# List settings whose default (empty) is the same on every machine.
_LIST_DEFAULTS = frozenset({"tools_allow", "tools_deny", "openai_compat_models", "fallback_models",
                            "allowed_origins", "memory_embedding_providers",
                            "jobs_notify_hosts"})  # fmt: skip


def env_example() -> str:
    """The text of ``.env.example``: every setting, its meaning and its default.

    Generated from the model, so the file cannot drift from the code; a test
    compares the committed file with this.
    """
    lines = [
        "# exai settings. Copy to .env (or export them) and change what you need.",
        "# Every line shows the default. Generated by `exai config --example`.",
    ]
    group = None
    for name, info in Settings.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("group") != group:
            group = extra.get("group")
            lines += ["", f"# --- {group} " + "-" * (60 - len(str(group)))]
        lines.append(f"# {info.description}")
        if info.default_factory is not None and name not in _LIST_DEFAULTS:
            lines.append(f"# {env_name(name)}=")  # the default depends on the machine
            continue
        default = info.get_default(call_default_factory=True)
        if isinstance(default, list):
            default = ",".join(default)
        elif isinstance(default, bool):
            default = str(default).lower()
        elif default is None:
            default = ""
        lines.append(f"{env_name(name)}={default}")
    return "\n".join(lines) + "\n"


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
