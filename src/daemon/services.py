"""Build and close the long-lived services the tools use.

Kept apart from the server so tests can build a daemon around services of their
choosing, and so the order of start-up and shutdown is written down once.
"""

from __future__ import annotations

from exai.settings import Settings
from exai.tools.base import NullAudit, Services

__all__ = ["build_services", "close_services"]


async def build_services(settings: Settings) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Services(settings=settings, audit=NullAudit())


async def close_services(services: Services) -> None:
    for name in ("providers", "store"):
        resource = getattr(services, name, None)
        if resource is not None:
            await resource.aclose()
    stop = getattr(services.audit, "stop", None)
    if stop is not None:
        await stop()
