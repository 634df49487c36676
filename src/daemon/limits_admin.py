"""The operator's run-time limits (``/admin/limits``), on the store and this daemon's book.

:class:`StoreLimitsAdmin` is what :class:`exai.port.LimitsAdmin` names: it reads and
writes the store's ``principal_limits`` (:mod:`exai.store.limits`) with the rule of
:func:`exai.accounting.limits.merged`, reads the table into this daemon's
:class:`~exai.accounting.limits.LimitBook` at once (the others see the change
within their poll), and records each change as a ``limits_changed`` audit event.
``exai limits`` writes the same table outside any daemon.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from exai.accounting.limits import LimitBook, budget_text, merged, overrides_of
from exai.settings import Settings

__all__ = ["StoreLimitsAdmin"]


class StoreLimitsAdmin:
    def __init__(self, store: Any, book: LimitBook, catalogue: Any, settings: Settings,
                 emit: Callable[..., None]) -> None:  # fmt: skip
        self._store = store
        self._book = book
        self._catalogue = catalogue
        self._settings = settings
        self._emit = emit

    async def list_limits(self) -> dict[str, Any]:
        rows = await self._store.principal_limits()
        defaults = {
            "budgets": {name: budget_text(budget)
                        for name, budget in self._book.default_budgets().items()},
            "rate_per_min": self._settings.rate_limit_per_min,
            "budget_alert_at": self._settings.budget_alert_at,
        }  # fmt: skip
        return {"defaults": defaults, "principals": [overrides_of(r).public() for r in rows]}

    async def set_limits(self, principal: str, changes: Mapping[str, Any], *,
                         by: str) -> dict[str, Any]:  # fmt: skip
        principal = principal.strip()
        if not principal:
            raise ValueError("a principal must be named")
        current = {row.principal: row for row in await self._store.principal_limits()}
        row = merged(current.get(principal), principal, changes, self._catalogue, by=by,
                     now=time.time())  # fmt: skip
        await self._store.put_principal_limits(row)
        await self._book.refresh()
        shown = overrides_of(row).public()
        self._emit("limits_changed", principal=principal, by=by, limits=shown)
        return shown

    async def clear_limits(self, principal: str, *, by: str) -> bool:
        removed: bool = await self._store.clear_principal_limits(principal)
        await self._book.refresh()
        if removed:
            self._emit("limits_changed", principal=principal, by=by, limits=None)
        return removed
