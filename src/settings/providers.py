"""The model providers: keys and endpoints, concurrency, retries, routing and streaming."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, BaseModel, Field, SecretStr

from exai.settings.fields import CommaList, group

__all__ = ["ProvidersSettings"]

_providers = group("providers")


class ProvidersSettings(BaseModel):
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
        '[{"when": {"sensitive": true}, "model": "local-llama"}]; see docs/models.md.',
    )  # fmt: skip
    models_file: Path | None = _providers(
        None, "A TOML file adding to or overriding the model catalogue."
    )
    stream_min_chunk_chars: int = _providers(200, "Smallest streamed chunk.", ge=1)
    stream_max_chunk_chars: int = _providers(
        2000, "Largest streamed chunk (a code block is never cut).", ge=16
    )
    tool_reasoning_max_mb: float = _providers(
        64.0, "Memory for the reasoning of tool rounds returned to stateless callers, kept to "
        "send back with them (thinking models want it), all principals together; the largest "
        "principal's least recently used first out; 0 keeps none.",
        ge=0,
    )  # fmt: skip
    tool_reasoning_principal_mb: float = _providers(
        16.0, "Each principal's share of the tool-round reasoning, in memory and in the store "
        "(least recently used first out in memory, oldest written in the store), so one "
        "principal never pushes out another's.",
        gt=0,
    )  # fmt: skip
    tool_reasoning_ttl_s: float = _providers(
        6 * 3600.0, "How long the reasoning of a tool round is kept for the caller's next "
        "request.", gt=0,
    )  # fmt: skip
