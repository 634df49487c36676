"""Telling an operator that a principal's spend crossed a share of its budget.

With ``EXAI_BUDGET_ALERT_AT`` (a fraction such as 0.8; 0 is off), the first call
that takes a principal's spend in a budget's period to that share of the budget
makes one ``budget_threshold`` audit event and one notification to
``EXAI_BUDGET_ALERT_URL``, sent by the jobs' notification plumbing (the same ntfy
or signed webhook, under the same address rule: see :mod:`exai.jobs.notify`).
Once per principal, budget and period: the period's alert is recorded in the store
(:meth:`exai.store.limits.LimitRows.claim_limit_alert`) before it is sent, and
the daemon whose record lands is the one that sends, so several daemons sharing
the store send it once between them.

:func:`crossed` is the decision, free of clocks and I/O; :class:`BudgetAlerts`
runs it after each settled call (:meth:`exai.accounting.ledger.Ledger.settle`)
and does the rest in a background task, so no call waits on a notification.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from exai.accounting.budgets import Budget
from exai.logs import get_logger
from exai.providers.pricing import from_nanos, to_nanos

__all__ = ["BudgetAlerts", "crossed", "period_key"]

log = get_logger("exai.accounting")

Send = Callable[[dict[str, Any]], Awaitable[str | None]]  # the error, None when delivered


def crossed(spent_nanos: int, budget: Budget, share: float) -> bool:
    """Whether spend has reached ``share`` of ``budget`` (never with ``share`` 0)."""
    if share <= 0:
        return False
    return spent_nanos >= to_nanos(budget.amount * Decimal(str(share)))


def period_key(budget: Budget, period_start: float, share: float) -> str:
    """What names one alert: the budget's currency and period, the period, the share."""
    day = datetime.fromtimestamp(period_start, UTC).date().isoformat()
    return f"{budget.currency}/{budget.period}/{day}@{share:g}"


class BudgetAlerts:
    def __init__(
        self,
        share: float,
        *,
        claim: Callable[[str, str, float], Awaitable[bool]],
        send: Send | None,
        emit: Callable[..., None],
        clock: Callable[[], float],
    ) -> None:
        self.share = share
        self._claim = claim
        self._send = send
        self._emit = emit
        self._clock = clock
        self._seen: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, principal: str, budget: Budget, spent: int, period_start: float) -> None:
        """After a settled call: start the alert if this call crossed the line."""
        if not crossed(spent, budget, self.share):
            return
        key = (principal, period_key(budget, period_start, self.share))
        if key in self._seen:
            return
        self._seen.add(key)
        task = asyncio.get_running_loop().create_task(self._alert(principal, key[1], budget,
                                                                  spent))  # fmt: skip
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alert(self, principal: str, key: str, budget: Budget, spent: int) -> None:
        now = self._clock()
        try:
            if not await self._claim(principal, key, now):
                return  # another daemon (or this one before a restart) has it
        except Exception as exc:
            log.warning("budget_alert_not_recorded", principal=principal, error=str(exc))
            self._seen.discard((principal, key))  # try again with the next call
            return
        payload = {
            "event": "budget_threshold",
            "principal": principal,
            "spent": float(from_nanos(spent)),
            "budget": float(budget.amount),
            "currency": budget.currency,
            "period": budget.period,
            "share": self.share,
            "message": (f"exai: principal {principal!r} has spent "
                        f"{from_nanos(spent).normalize():f} {budget.currency}, "
                        f"{self.share:.0%} or more of its budget of "
                        f"{budget.amount.normalize():f} {budget.currency} per UTC "
                        f"{budget.period}"),
        }  # fmt: skip
        error = None
        if self._send is not None:
            try:
                error = await self._send(payload)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        self._emit("budget_threshold", principal=principal, period_key=key,
                   spent=payload["spent"], budget=payload["budget"],
                   currency=budget.currency, period=budget.period, share=self.share,
                   notified=self._send is not None and error is None,
                   error=error)  # fmt: skip
        if error is not None:
            log.warning("budget_alert_not_delivered", principal=principal, error=error)

    async def aclose(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
