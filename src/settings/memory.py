"""Long-term memory: its store, retrieval and injection, embeddings and extraction."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, field_validator

from exai.settings.fields import CommaList, group
from exai.settings.values import parse_type_weights

__all__ = ["MemorySettings"]

_memory = group("memory")


class MemorySettings(BaseModel):
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

    @field_validator("memory_type_weights")
    @classmethod
    def _type_weights(cls, value: str) -> str:
        parse_type_weights(value)
        return value
