"""Where conversations are stored and how long, how many turns and forks they may hold."""

from __future__ import annotations

from pydantic import BaseModel

from exai.settings.fields import group

__all__ = ["ConversationsSettings"]

_conversations = group("conversations")


class ConversationsSettings(BaseModel):
    store_url: str | None = _conversations(
        None, "sqlite:///path or postgresql://user:pass@host/db (a Supabase connection string "
        "works); empty: SQLite in EXAI_DATA_DIR.",
    )  # fmt: skip
    conversation_ttl_s: float = _conversations(
        30 * 24 * 3600.0, "A conversation expires this long after its last turn.", gt=0
    )
    conversation_max_turns: int = _conversations(10000, "Turns one conversation may hold.", ge=1)
    fork_max_depth: int = _conversations(10, "How deeply forks may nest.", ge=1)
    request_log_days: float = _conversations(
        30.0, "Days the request log (one row per call, the console's Requests page and "
        "`exai requests`) keeps a call; 0 keeps every call.", ge=0,
    )  # fmt: skip
    history_low_water: float = _conversations(
        0.5, "When a thread outgrows the model's window, old turns are dropped until the "
        "history fills this fraction of the room, so that later turns reuse the cached "
        "prompt prefix (1: one turn at a time).", gt=0, le=1,
    )  # fmt: skip
