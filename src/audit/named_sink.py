"""The sink ``EXAI_AUDIT_SINK`` names: checked in the daemon, built in the writer.

:func:`sink_spec` reads the settings into plain values (the daemon checks them
at start-up, so a missing one stops it); :func:`sink_from_spec` builds the sink
from those values in the writer process. The sinks themselves import only the
contract (:mod:`exai.audit.sinks`), never this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from exai.audit.sinks import LocalOnlySink, Sink

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["make_sink", "sink_from_spec", "sink_spec"]


def sink_spec(settings: Settings) -> dict[str, Any]:
    """What the sink ``EXAI_AUDIT_SINK`` names needs, as plain values (credentials included).

    The writer process builds its sink from this (:func:`sink_from_spec`); it
    is checked here, in the daemon, so a missing value stops start-up.
    """
    kind = settings.audit_sink
    if kind == "supabase":
        if not settings.supabase_url or settings.supabase_service_role_key is None:
            raise ValueError(
                "EXAI_AUDIT_SINK=supabase needs SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY"
            )
        key = settings.supabase_service_role_key.get_secret_value()
        return {"kind": kind, "url": settings.supabase_url, "key": key}
    if kind == "postgres":
        if settings.audit_postgres_url is None:
            raise ValueError("EXAI_AUDIT_SINK=postgres needs EXAI_AUDIT_POSTGRES_URL")
        return {"kind": kind, "url": settings.audit_postgres_url.get_secret_value()}
    if kind == "jsonl":
        path = settings.audit_jsonl_path or settings.data_dir / "audit.jsonl"
        return {"kind": kind, "path": str(path)}
    return {"kind": "none"}


def sink_from_spec(spec: dict[str, Any], *, timeout_s: float = 30.0) -> Sink:
    """The sink a :func:`sink_spec` describes, configured but not yet opened."""
    kind = spec["kind"]
    if kind == "supabase":
        from exai.audit.supabase_sink import SupabaseSink

        return SupabaseSink(spec["url"], spec["key"], timeout_s=timeout_s)
    if kind == "postgres":
        from exai.audit.postgres_sink import PostgresSink

        return PostgresSink(spec["url"], timeout_s=timeout_s)
    if kind == "jsonl":
        from exai.audit.jsonl_sink import JsonlSink

        return JsonlSink(Path(spec["path"]))
    return LocalOnlySink()


def make_sink(settings: Settings, *, timeout_s: float = 30.0) -> Sink:
    """The sink named by ``EXAI_AUDIT_SINK``, configured but not yet opened."""
    return sink_from_spec(sink_spec(settings), timeout_s=timeout_s)
