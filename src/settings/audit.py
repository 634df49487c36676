"""The audit trail: whether it is kept, where its outbox ships, how fast and how much."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, SecretStr

from exai.settings.fields import group

__all__ = ["AuditSettings"]

_audit = group("audit")


class AuditSettings(BaseModel):
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
