"""The operator's read-only queries: everyone's spend, the audit trail, health, settings.

Part of :class:`exai.daemon.reads.CoreReads`. Every query here first checks
that the asking principal has the operator's view (:func:`exai.auth.is_admin`:
the JWT scope ``exai:admin`` or a name in ``EXAI_ADMIN_PRINCIPALS``) and
raises ``FORBIDDEN`` otherwise, so no face can show them to anyone else by
forgetting a check of its own.

The audit trail is read from the local outbox file (shipped events are kept
in its archive ring), on a connection of its own in a worker thread: the
trail's own connection belongs to its writer, and an operator's query must
never wait behind, or hold up, the writing of events.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from exai.accounting.budgets import parse_budgets, period_window
from exai.audit.outbox import AuditOutbox
from exai.auth import is_admin
from exai.errors import ForbiddenError
from exai.providers.pricing import from_nanos

if TYPE_CHECKING:
    from exai.auth import Principal
    from exai.daemon.core import Core
    from exai.store.costs import UsageLine

__all__ = ["OperatorReads", "usage_lines"]

_DAY = 86400.0
_MAX_EVENTS = 1000


class OperatorReads:
    _core: Core

    def is_admin(self, principal: Principal) -> bool:
        return is_admin(principal, self._core.settings.admin_principals)

    def _require_admin(self, principal: Principal) -> None:
        if not self.is_admin(principal):
            raise ForbiddenError(
                f"principal {principal.name!r} is not an operator (the JWT scope exai:admin "
                "or EXAI_ADMIN_PRINCIPALS gives the operator's view)"
            )

    async def spend_all(self, principal: Principal, *, days: int = 30) -> dict[str, Any]:
        self._require_admin(principal)
        services = self._core.services
        now = time.time()
        since = now - now % _DAY - (max(1, min(days, 366)) - 1) * _DAY
        out: dict[str, Any] = {"since": since, "until": now, "principals": [], "days": [],
                               "budgets": []}  # fmt: skip
        store = services.store
        if store is None:
            return out
        out["principals"] = usage_lines(await store.usage_report(since, now, "principal"),
                                        "principal")  # fmt: skip
        out["days"] = usage_lines(await store.usage_report(since, now, "day"), "day")
        budgets = parse_budgets(self._core.settings.budgets)
        names = {line["key"] for line in out["principals"] if line["key"]} | set(budgets) - {"*"}
        for name in sorted(names):
            budget = budgets.get(name) or budgets.get("*")
            if budget is None:
                continue
            start, reset = period_window(budget.period, now)
            spent = from_nanos(await store.spent(name, budget.currency, start, reset))
            out["budgets"].append({
                "principal": name, "amount": str(budget.amount), "currency": budget.currency,
                "period": budget.period, "spent": str(spent),
                "left": str(max(budget.amount - spent, 0)), "resets_at": reset,
                "from": name if name in budgets else "*",
            })  # fmt: skip
        return out

    async def audit_events(
        self, principal: Principal, *, kind: str = "", who: str = "", text: str = "",
        limit: int = 100, before: str = "",
    ) -> dict[str, Any]:  # fmt: skip
        self._require_admin(principal)
        s = self._core.settings
        path = s.outbox_path
        if not s.audit_enabled or not path.exists():
            return {"enabled": s.audit_enabled, "events": []}
        limit = max(1, min(int(limit), _MAX_EVENTS))

        def query() -> list[dict[str, Any]]:
            outbox = AuditOutbox(path, max_events=s.audit_max_outbox_events)
            outbox.open()
            try:
                return outbox.search(
                    limit,
                    kind=kind.strip() or None,
                    principal=who.strip() or None,
                    text=text.strip() or None,
                    before=before.strip() or None,
                )
            finally:
                outbox.close()  # fmt: skip

        events = await asyncio.to_thread(query)
        return {"enabled": True, "events": events}

    async def health(self, principal: Principal) -> dict[str, Any]:
        self._require_admin(principal)
        core = self._core
        ready, checks = await core.readiness()
        memory = core.services.memory
        if memory is not None:
            checks["memory"] = {"ok": True, **memory.store.status()}
        return {"ready": ready, "checks": checks, "stats": core.stats()}

    def settings_view(self, principal: Principal) -> dict[str, Any]:
        self._require_admin(principal)
        return self._core.settings.masked()


def usage_lines(lines: Iterable[UsageLine], group: str) -> list[dict[str, Any]]:
    """A usage report's lines as the console shows them: amounts as decimal strings,
    a day as its ISO date."""
    out = []
    for line in lines:
        key = line.key
        if group == "day" and key is not None:
            key = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=int(key))).date().isoformat()
        out.append({
            "key": key, "currency": line.currency, "calls": line.calls,
            "prompt_tokens": line.prompt_tokens, "completion_tokens": line.completion_tokens,
            "cached_prompt_tokens": line.cached_prompt_tokens,
            "cost": None if line.currency is None else str(from_nanos(line.cost_total)),
        })  # fmt: skip
    return out
