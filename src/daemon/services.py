"""Build and close the long-lived services the tools use.

Kept apart from the server so tests can build a daemon around services of their
choosing, and so the order of start-up and shutdown is written down once: the
audit trail first (everything else reports to it), then the conversation store,
then the ledger that keeps cost rows in it, then the providers; closing runs in
reverse, so the ledger writes its last rows while the store is open, and the
audit trail hears about everything that happened before it flushes to its outbox.
"""

from __future__ import annotations

from typing import Any

from exai.accounting.budgets import parse_budgets
from exai.accounting.ledger import Ledger
from exai.audit import AuditTrail
from exai.audit.trail import default_instance_id
from exai.logs import get_logger
from exai.providers import ProviderRegistry
from exai.settings import Settings
from exai.store import open_store
from exai.tools.base import NullAudit, Services

__all__ = ["build_services", "close_services", "open_jobs"]

log = get_logger("exai.daemon")


async def build_services(settings: Settings) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    audit: AuditTrail | NullAudit = NullAudit()
    if settings.audit_enabled:
        audit = AuditTrail(settings)
        await audit.start()
    store = await open_store(settings)
    instance_id = getattr(audit, "instance_id", None) or default_instance_id()
    ledger = Ledger(store, parse_budgets(settings.budgets), instance_id=instance_id)
    ledger.start()
    providers = ProviderRegistry.from_settings(settings, emit=audit.emit)
    await providers.refresh_models()
    memory = None
    if settings.memory_enabled:
        from exai.memory import open_memory

        memory = await open_memory(settings, audit.emit)
        if settings.memory_extraction_enabled:
            from exai.memory.extraction import ExtractionWorker

            memory.worker = ExtractionWorker(memory, providers, settings.memory_extraction_model,
                                             settings.memory_extraction_max_attempts)  # fmt: skip
            memory.worker.start()
    return Services(settings=settings, audit=audit, providers=providers, store=store,
                    memory=memory, ledger=ledger)  # fmt: skip


async def close_services(services: Services) -> None:
    for name in ("providers", "memory", "ledger", "store"):
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
