"""The daemon's own settings: where it listens, who may call it, its limits, its cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

from exai.settings.fields import CommaList, default_data_dir, group, list_field
from exai.settings.values import parse_budgets, parse_token_list

__all__ = ["DaemonSettings"]

_daemon = group("daemon")

# HS256's key should be at least as long as its hash (RFC 7518 section 3.2): 32 bytes.
JWT_SECRET_MIN_BYTES = 32


class DaemonSettings(BaseModel):
    ws_host: str = _daemon(
        "127.0.0.1", "Address to listen on; anything but loopback needs a token."
    )
    ws_port: int = _daemon(8079, "Port for WebSocket and HTTP (/health, /ready, /metrics).",
                           ge=0, le=65535)  # fmt: skip
    http_port: int | None = _daemon(
        8078,
        "Port for the HTTP faces (MCP at /mcp, OpenAI-compatible /v1) on EXAI_WS_HOST; "
        "off turns them off.",
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
    http_header_timeout_s: float = _daemon(
        10.0, "An HTTP request's line and headers must arrive within this, from the connection's "
        "start or the request's first byte; otherwise 408 and the connection is closed.", gt=0,
    )  # fmt: skip
    http_body_timeout_s: float = _daemon(
        60.0, "An HTTP request's body must arrive within this after its headers; otherwise the "
        "connection is closed.", gt=0,
    )  # fmt: skip
    mcp_max_sessions: int = _daemon(
        1024, "MCP sessions (/mcp, 2025-11-25 era) the daemon keeps at once; an initialize "
        "beyond this is refused with 503.", ge=1,
    )  # fmt: skip
    mcp_max_sessions_per_principal: int = _daemon(
        64, "MCP sessions one principal may hold at once; an initialize beyond this is refused "
        "with 429.", ge=1,
    )  # fmt: skip
    mcp_session_idle_s: float = _daemon(
        600.0, "An MCP session with no request in flight (no call, no open GET stream) for this "
        "long is ended; its id then answers 404 and the client starts a new one.", gt=0,
    )  # fmt: skip
    ws_token: SecretStr | None = _daemon(None, "Token for the principal 'default'.")
    ws_tokens: SecretStr | None = _daemon(
        None, "More tokens, each naming its principal: alice=token1,bob=token2."
    )
    jwt_secret: SecretStr | None = _daemon(
        None, "HS256 secret, at least 32 bytes; JWTs with sub, exp (nbf, scopes optional) are "
        "accepted as tokens.",
    )  # fmt: skip
    jwt_leeway_s: float = _daemon(30.0, "Clock skew allowed when checking exp and nbf.", ge=0)
    reasoning_seal_key: SecretStr | None = _daemon(
        None, "Key (at least 32 bytes) sealing the reasoning the Anthropic and Responses faces "
        "hand clients to bring back; every daemon of a deployment needs the same one. Empty: "
        "a key of this daemon's own, kept in the data directory.",
    )  # fmt: skip
    budgets: str = _daemon(
        "", "Spending budgets per principal and UTC day or month, e.g. "
        "alice=5 USD/day,*=100 USD/month (* is every principal without its own; a JWT's "
        "exai_budget claim {amount, currency, period} wins). Over budget, calls are refused "
        "with BUDGET_EXCEEDED before any provider request. Empty: no budgets.",
    )  # fmt: skip
    budget_alert_at: float = _daemon(
        0.0, "Share of a budget (0.8: 80%) at which its principal's spend in a period is "
        "notified once per period, to EXAI_BUDGET_ALERT_URL and as a budget_threshold audit "
        "event. 0: off.", ge=0, le=1,
    )  # fmt: skip
    budget_alert_url: str | None = _daemon(
        None, "Where budget threshold notifications go: an ntfy topic URL or a webhook signed "
        "with EXAI_JOBS_WEBHOOK_SECRET (EXAI_BUDGET_ALERT_KIND), under the jobs' address rule "
        "(EXAI_JOBS_NOTIFY_HOSTS). Empty: the audit event only.",
    )  # fmt: skip
    budget_alert_kind: Literal["webhook", "ntfy"] = _daemon(
        "webhook", "How EXAI_BUDGET_ALERT_URL is notified."
    )
    limits_poll_s: float = _daemon(
        0.5, "How often each daemon looks for limits changed at run time (exai limits) in "
        "the conversation store.", gt=0,
    )  # fmt: skip
    data_dir: Path = Field(
        default_factory=default_data_dir,
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
    max_connections: int = _daemon(4096, "Open connections, in total, on each listener "
                                   "(WebSocket, HTTP).", ge=1)  # fmt: skip
    max_connections_per_ip: int = _daemon(2048, "Open connections from one address, on each "
                                          "listener (WebSocket, HTTP).", ge=1)  # fmt: skip
    max_unauthenticated_per_ip: int = _daemon(
        256, "Connections from one address (an IPv6 /64) not logged in yet, WebSocket and HTTP "
        "together: a WebSocket before a valid hello, an HTTP connection before a request with "
        "a valid token; beyond this the connection is refused with HTTP 429.", ge=1,
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
    public_url: str | None = _daemon(
        None, "The address people reach the HTTP listener at (https://exai.example.com), for "
        "links to the console in job notifications; empty: the listener's own address.",
    )  # fmt: skip
    admin_principals: CommaList = list_field(
        "daemon", "Principals with the operator's view of the console (every principal's "
        "spend, the audit trail, health, settings), comma-separated; a JWT with the scope "
        "exai:admin has it too.",
    )  # fmt: skip
    console_session_ttl_s: float = _daemon(
        8 * 3600.0, "How long a console sign-in lasts (never longer than the JWT it was made "
        "with).", gt=0,
    )  # fmt: skip

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL such as https://exai.example.com")
        if parts.query or parts.fragment:
            raise ValueError("must not carry a query or a fragment")
        return value.strip().rstrip("/")

    @field_validator("budgets")
    @classmethod
    def _budgets_valid(cls, value: str) -> str:
        parse_budgets(value)
        return value

    @field_validator("ws_tokens")
    @classmethod
    def _tokens_valid(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_token_list(value.get_secret_value())
        return value

    @field_validator("http_port", mode="before")
    @classmethod
    def _http_port_off(cls, value: Any) -> Any:
        # An empty value means "not set" for every setting (the default port); the HTTP
        # faces are turned off by name.
        if isinstance(value, str) and value.strip().lower() == "off":
            return None
        return value

    @field_validator("reasoning_seal_key")
    @classmethod
    def _seal_key_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if (
            value is not None
            and value.get_secret_value()
            and len(value.get_secret_value().encode()) < 32
        ):
            raise ValueError("must be at least 32 bytes")
        return value

    @field_validator("jwt_secret")
    @classmethod
    def _jwt_secret_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        size = len(value.get_secret_value().encode()) if value is not None else 0
        if 0 < size < JWT_SECRET_MIN_BYTES:
            raise ValueError(
                f"{size} bytes is too short for HS256; use at least {JWT_SECRET_MIN_BYTES} "
                'random bytes, e.g. the output of: python -c "import secrets; '
                'print(secrets.token_urlsafe(32))"'
            )
        return value
