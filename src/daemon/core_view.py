"""What the core's read-only queries need of it, as an interface.

The reads (:mod:`exai.daemon.reads`, :mod:`exai.daemon.operator_reads`,
:mod:`exai.daemon.usage_reads`) answer from the core's settings and services
and report its health; the core (:class:`exai.daemon.core.Core`) hands itself
to them as this, so they know what they use of it and nothing else, and the
core's module is the only one of the two that imports the other.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from exai.settings import Settings
    from exai.tools.base import Services

__all__ = ["CoreView"]


class CoreView(Protocol):
    settings: Settings

    @property
    def services(self) -> Services:
        """The services, once the core has started."""
        ...

    def readiness(self) -> Awaitable[tuple[bool, dict[str, Any]]]:
        """Whether every dependency answers, and what each said."""
        ...

    def stats(self) -> dict[str, Any]:
        """A snapshot of the core's counters."""
        ...
