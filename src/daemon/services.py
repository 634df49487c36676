"""Build and close the long-lived services the tools use.

Kept apart from the server so tests can build a daemon around services of their
choosing, and so the order of start-up and shutdown is written down once: the
audit trail first (everything else reports to it), then the conversation store,
then the ledger that keeps cost rows in it, the providers, memory, the keeper of
agent sessions (handed memory, which learns from them) and the job store;
closing runs in reverse, so the keeper and the ledger write their last rows while
the store (and memory) are open, and the audit trail hears about everything that
happened before it flushes to its outbox.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exai.accounting.budgets import parse_budgets
from exai.accounting.ledger import Ledger
from exai.accounting.limits import LimitBook
from exai.audit import AuditTrail
from exai.audit.trail import default_instance_id
from exai.daemon.alerts import budget_alerts
from exai.logs import get_logger
from exai.providers import ProviderRegistry
from exai.settings import Settings
from exai.store import open_store
from exai.store.session_writer import SessionWriter
from exai.tools.base import NullAudit, Services
from exai.tools.session_keeper import SessionKeeper

__all__ = ["build_services", "close_services", "open_jobs"]

log = get_logger("exai.daemon")


async def build_services(
    settings: Settings, *, registry: Any = None, stats: Callable[[], dict[str, Any]] | None = None
) -> Services:
    """Open every service; if one fails, close those already open and re-raise, so a
    failed start leaves no thread or connection behind to keep the process alive.

    ``registry`` is the tool registry, for tools that describe the others and for
    the job service; ``stats`` the daemon's snapshot, for ``status``.

    The exception carries a note (``add_note``) naming what was being opened and
    the setting behind it, which ``exai serve`` prints with the error.
    """
    partial = Services(settings=settings, audit=NullAudit(), registry=registry, stats=stats)
    opening = "the data directory (EXAI_DATA_DIR)"
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        if settings.audit_enabled:
            opening = "the audit trail (EXAI_AUDIT_SINK)"
            audit = AuditTrail(settings)
            partial.audit = audit
            await audit.start()
        opening = "the conversation store (EXAI_STORE_URL)"
        partial.store = store = await open_store(settings)
        instance_id = getattr(partial.audit, "instance_id", None) or default_instance_id()
        # Budgets, rates and models set at run time, over the settings' (docs/cost.md).
        limits = LimitBook(
            store, default_budgets=parse_budgets(settings.budgets),
            default_rate=settings.rate_limit_per_min, poll_s=settings.limits_poll_s,
        )  # fmt: skip
        await limits.refresh()
        alerts = budget_alerts(settings, store, partial.audit.emit)
        partial.ledger = Ledger(store, parse_budgets(settings.budgets), instance_id=instance_id,
                                call_log_days=settings.request_log_days, limits=limits,
                                alerts=alerts)  # fmt: skip
        partial.ledger.start()
        limits.start()
        opening = "the providers (EXAI_MODELS_FILE, EXAI_ROUTING_RULES)"
        partial.providers = providers = ProviderRegistry.from_settings(
            settings, emit=partial.audit.emit
        )
        await providers.refresh_models()
        if settings.memory_enabled:
            from exai.memory import open_memory

            opening = "the memory store (EXAI_MEMORY_URL)"
            partial.memory = memory = await open_memory(settings, partial.audit.emit)
            if settings.memory_extraction_enabled:
                from exai.memory.extraction import ExtractionWorker

                memory.worker = ExtractionWorker(
                    memory,
                    providers,
                    settings.memory_extraction_model,
                    settings.memory_extraction_max_attempts,
                )
                memory.worker.start()
        # Agent sessions teach memory too, when it extracts (the keeper is made once
        # memory is open, so that it is handed it).
        teaches = partial.memory if settings.memory_extraction_enabled else None
        # Turns are kept by a writer process of their own (exai.store.session_writer).
        partial.sessions = SessionKeeper(SessionWriter(settings), memory=teaches,
                                         closes_store=True)  # fmt: skip
        partial.sessions.start()
        if settings.jobs_enabled:
            opening = "the job store (EXAI_JOBS_URL)"
            partial.jobs = await open_jobs(settings, registry, store)
    except BaseException as exc:
        exc.add_note(f"while opening {opening}")
        await close_services(partial)
        raise
    return partial


async def close_services(services: Services) -> None:
    if services.jobs is not None:
        try:
            await services.jobs.store.aclose()
        except Exception:
            log.exception("closing a service failed", service="jobs")
    ledger = services.ledger
    for part in (getattr(ledger, "limits", None), getattr(ledger, "alerts", None)):
        if part is not None:
            await part.aclose()
    for name in ("sessions", "providers", "memory", "ledger", "store"):
        resource = getattr(services, name, None)
        if resource is not None:
            try:
                await resource.aclose()
            except Exception:
                log.exception("closing a service failed", service=name)
    stop = getattr(services.audit, "stop", None)
    if stop is not None:
        await stop()


async def open_jobs(settings: Settings, registry: Any, conversations: Any) -> Any:
    """The job service the ``schedule`` and ``jobs`` tools use (its runner is a face)."""
    from exai.jobs.backends import open_job_store
    from exai.jobs.service import JobService

    store = await open_job_store(settings)
    return JobService(store, settings, registry=registry, conversations=conversations)
