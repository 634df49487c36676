"""The operator's read-only queries: everyone's spend, the request log, the audit trail,
health, settings.

Part of :class:`exai.daemon.reads.CoreReads`. Every query here first checks
that the asking principal has the operator's view (:func:`exai.auth.is_admin`:
the JWT scope ``exai:admin`` or a name in ``EXAI_ADMIN_PRINCIPALS``) and
raises ``FORBIDDEN`` otherwise, so no face can show them to anyone else by
forgetting a check of its own.

The audit trail is read from the local outbox file (shipped events are kept
in its archive ring), on a connection of its own in a worker thread: the
trail's own connection belongs to its writer, and an operator's query must
never wait behind, or hold up, the writing of events.

The request log is read from the conversation store (:mod:`exai.store.call_log`),
one indexed page at a time; a call's detail adds its audit events from the outbox
(events of its session and request, around its time) and the turn it stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from exai.accounting.budgets import parse_budgets, period_window
from exai.audit.events import format_ts
from exai.audit.outbox import AuditOutbox
from exai.auth import is_admin
from exai.errors import ForbiddenError
from exai.providers.pricing import from_nanos
from exai.store.call_log import CallFilter, CallLogRow, Cursor

if TYPE_CHECKING:
    from exai.auth import Principal
    from exai.daemon.core_view import CoreView
    from exai.store.costs import UsageLine

__all__ = ["OperatorReads", "call_row", "usage_lines"]

_DAY = 86400.0
_MAX_EVENTS = 1000
_CALL_EVENTS = 200


class OperatorReads:
    _core: CoreView

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
        # The operator's run-time limits (exai limits) over the setting's (docs/cost.md).
        book = getattr(services.ledger, "limits", None)
        overrides = {o.principal: o.budget for o in book.listed() if o.budget} if book else {}
        names = {line["key"] for line in out["principals"] if line["key"]}
        names |= (set(budgets) - {"*"}) | set(overrides)
        for name in sorted(names):
            budget = overrides.get(name) or budgets.get(name) or budgets.get("*")
            if budget is None:
                continue
            start, reset = period_window(budget.period, now)
            spent = from_nanos(await store.spent(name, budget.currency, start, reset))
            out["budgets"].append({
                "principal": name, "amount": str(budget.amount), "currency": budget.currency,
                "period": budget.period, "spent": str(spent),
                "left": str(max(budget.amount - spent, 0)), "resets_at": reset,
                "from": "limits" if name in overrides else name if name in budgets else "*",
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

    async def request_log(
        self, principal: Principal, filters: dict[str, Any], *, before: str = "",
        after_id: int | None = None, limit: int = 50,
    ) -> dict[str, Any]:  # fmt: skip
        self._require_admin(principal)
        where = CallFilter.of(filters)
        store = self._core.services.store
        out: dict[str, Any] = {"rows": [], "next": None, "top": after_id or 0,
                               "filters": where.query()}  # fmt: skip
        if store is None or not hasattr(store, "call_log_page"):
            return out
        if after_id is None and not before:  # the first page: a live tail starts here
            out["top"] = await store.call_log_top()
        cursor = Cursor.parse(before) if before else None
        rows = await store.call_log_page(where, before=cursor, after_id=after_id, limit=limit)
        out["rows"] = [call_row(row) for row in rows]
        if after_id is not None and rows:
            out["top"] = max(int(row.id or 0) for row in rows)
        if after_id is None and len(rows) == max(1, min(limit, 1000)):
            out["next"] = str(Cursor(rows[-1].at, int(rows[-1].id or 0)))
        return out

    async def request_call(self, principal: Principal, row_id: int) -> dict[str, Any] | None:
        self._require_admin(principal)
        store = self._core.services.store
        if store is None or not hasattr(store, "call_log_row"):
            return None
        row = await store.call_log_row(row_id)
        if row is None:
            return None
        out: dict[str, Any] = {"call": call_row(row), "turn": None, "events": None}
        turn = await store.call_turn(row.principal, row.session_id, row.request_id)
        if turn is not None:
            out["turn"] = {"thread_id": turn[0], "seq": turn[1]}
        elif row.thread_id:
            out["turn"] = {"thread_id": row.thread_id, "seq": None}
        s = self._core.settings
        if s.audit_enabled and s.outbox_path.exists():
            start = row.at - row.latency_ms / 1000 - 5
            after = format_ts(datetime.fromtimestamp(start, UTC))
            before = format_ts(datetime.fromtimestamp(row.at + 60, UTC))

            def query() -> list[dict[str, Any]]:
                outbox = AuditOutbox(s.outbox_path, max_events=s.audit_max_outbox_events)
                outbox.open()
                try:
                    found = outbox.search(_CALL_EVENTS, text=row.request_id, before=before,
                                          after=after)  # fmt: skip
                finally:
                    outbox.close()
                return [e for e in found if e.get("request_id") == row.request_id
                        and e.get("session_id") in (None, row.session_id)]  # fmt: skip

            out["events"] = sorted(await asyncio.to_thread(query), key=lambda e: e.get("ts", ""))
        return out

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


def call_row(row: CallLogRow) -> dict[str, Any]:
    """A request-log row as the console and ``exai requests`` show it: its cost as a
    decimal string (None without a priced model call), its page cursor."""
    out = row.as_dict()
    cost = from_nanos(row.cost) if row.currency is not None else None
    out["cost"] = None if cost is None else _plain(cost)
    out["cursor"] = str(Cursor(row.at, int(row.id or 0)))
    return out


def _plain(amount: Decimal) -> str:
    text = f"{amount:.9f}".rstrip("0").rstrip(".")
    return text or "0"


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
