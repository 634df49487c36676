"""The ledger: what each principal has spent, budgets enforced before a call, cost rows.

One :class:`Ledger` per daemon. A tool's model call goes through it twice
(see :func:`exai.tools.turn.ask_model`): :meth:`Ledger.admit` before anything is
sent, which refuses the call with ``BUDGET_EXCEEDED`` when the principal's
budget would be exceeded (the rule is :func:`exai.accounting.budgets.judge`),
and :meth:`Ledger.settle` when the answer is in, which adds what it cost.
When the whole tool call is over, :meth:`Ledger.record` queues one
:class:`~exai.store.costs.CostRow` per model call for the store, and
:meth:`Ledger.log_call` the call's one row of the request log
(:class:`~exai.store.call_log.CallLogRow`); both are written in batches by one
background task so no call waits for those writes (cost rows at once, request-log
rows gathered for up to 0.2 s), and that task also keeps the request log within its
retention (``EXAI_REQUEST_LOG_DAYS``).

The check is cheap and exact under concurrency: the spend this daemon made is a
running total in memory, updated as calls finish; calls in flight hold a
reservation of the most they can cost (prompt and a reply of their output cap,
see :mod:`exai.accounting.budgets`) until they settle; and the check and
the reservation happen in one step of the event loop, so two concurrent calls
cannot both take the last of a budget. What other daemons sharing the store (and
this one before a restart) spent is read from the store, leaving out this
daemon's own rows, when a principal's period is first needed and again every
``refresh_s``: spend on another daemon is seen within that delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from exai.accounting.budgets import Budget, judge, period_window
from exai.errors import BudgetExceededError
from exai.logs import get_logger
from exai.providers.base import Usage
from exai.providers.pricing import Cost, Spend, from_nanos, to_nanos
from exai.store.call_log import CallLogRow
from exai.store.costs import CostRow

if TYPE_CHECKING:
    from exai.accounting.limits import LimitBook
    from exai.auth import Principal

__all__ = ["Charge", "Ledger", "Reservation", "charge_fields"]

log = get_logger("exai.accounting")

_Key = tuple[str, str, str, float]  # principal, currency, period, period start
_BATCH = 500
_PRUNE_EVERY_S = 3600.0
# How long the writer lets request-log rows gather once one is queued: a write per
# call (every call queues one) would cost each call a round trip to the store's
# thread; one every 0.2 s costs none of them that. Cost rows are written at once
# (spend is read back from them), taking the gathered rows along.
_GATHER_S = 0.2


@dataclass(slots=True)
class Charge:
    """One model call's usage and cost (None: the model has no price)."""

    model: str
    provider: str
    usage: Usage
    cost: Cost | None
    at: float = field(default_factory=time.time)


@dataclass(slots=True)
class Reservation:
    """A call's hold on its principal's budgets until it settles: per budget, its
    period's key, the nanos held and the budget itself."""

    holds: list[tuple[_Key, int, Budget]] = field(default_factory=list)
    open: bool = True

    @property
    def key(self) -> _Key | None:
        """The first budget's period, None when no budget applies."""
        return self.holds[0][0] if self.holds else None


class Ledger:
    def __init__(
        self,
        store: Any,
        budgets: Mapping[str, Budget] | None = None,
        *,
        instance_id: str,
        clock: Callable[[], float] = time.time,
        refresh_s: float = 60.0,
        call_log_days: float = 30.0,
        limits: LimitBook | None = None,
        alerts: Callable[[str, Budget, int, float], None] | None = None,
    ) -> None:
        self._store = store
        self._budgets = dict(budgets or {})
        # The run-time limits (exai.accounting.limits); None: budgets above and JWT claims.
        self.limits = limits
        # Told (principal, budget, nanos spent, period start) after each settled call
        # under a budget: the threshold notifications (exai.accounting.alerts).
        self.alerts = alerts
        self.instance_id = instance_id
        self._clock = clock
        self._refresh_s = refresh_s
        self._own: dict[_Key, int] = {}  # nanos this daemon spent
        self._reserved: dict[_Key, int] = {}
        self._others: dict[_Key, tuple[int, float]] = {}  # nanos, when read
        self._reading: dict[_Key, asyncio.Future[int]] = {}
        self._queue: list[CostRow] = []
        self._calls: list[CallLogRow] = []
        self._call_log_s = call_log_days * 86400.0  # 0: kept for ever
        self._pruned_at = 0.0
        self._flushing = asyncio.Lock()
        self._costs_queued = asyncio.Event()  # ends the request-log rows' gathering
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closing = False

    # --- budgets ----------------------------------------------------------

    def budgets_for(self, principal: Principal) -> tuple[Budget, ...]:
        """Every budget a call of ``principal`` must fit (see exai.accounting.limits):
        the key's and the principal's run-time override, else the setting, else ``*``'s."""
        if self.limits is not None:
            return self.limits.effective(principal).budgets
        own = getattr(principal, "budget", None)
        if own is not None:
            return (own,)
        found = self._budgets.get(principal.name) or self._budgets.get("*")
        return () if found is None else (found,)

    def budget_for(self, principal: Principal) -> Budget | None:
        """The first of :meth:`budgets_for`, as the console shows it."""
        budgets = self.budgets_for(principal)
        return budgets[0] if budgets else None

    async def admit(self, principal: Principal, estimate: Callable[[], Cost | None]) -> Reservation:
        """Hold the call's estimated cost under every budget, or raise ``BUDGET_EXCEEDED``.

        ``estimate`` is asked only when a budget applies.
        """
        budgets = self.budgets_for(principal)
        if not budgets:
            return Reservation()
        now = self._clock()
        windows = []
        for budget in budgets:
            start, reset = period_window(budget.period, now)
            key = (principal.name, budget.currency, budget.period, start)
            others = await self._others_spent(key, reset)
            windows.append((budget, key, reset, others))
        # From here to the reservation nothing awaits: check and hold are one step.
        guess = estimate()
        holds = []
        for budget, key, reset, others in windows:
            priced = guess is not None and guess.currency == budget.currency
            guess_nanos = to_nanos(guess.total) if guess is not None and priced else 0
            spent = others + self._own.get(key, 0)
            reserved = self._reserved.get(key, 0)
            if not judge(budget, from_nanos(spent), from_nanos(reserved),
                         from_nanos(guess_nanos)):  # fmt: skip
                raise _exceeded(principal.name, budget, spent, reserved, guess, reset, now)
            holds.append((key, guess_nanos, budget))
        for key, nanos, _ in holds:
            self._reserved[key] = self._reserved.get(key, 0) + nanos
        return Reservation(holds)

    def release(self, reservation: Reservation) -> None:
        """Give back a reservation (the call failed or settled)."""
        if not reservation.open:
            return
        reservation.open = False
        for key, nanos, _ in reservation.holds:
            left = self._reserved.get(key, 0) - nanos
            if left > 0:
                self._reserved[key] = left
            else:
                self._reserved.pop(key, None)

    def settle(self, principal: str, reservation: Reservation, charge: Charge) -> None:
        """The call is answered: release its hold and count what it cost."""
        self.release(reservation)
        cost = charge.cost
        if cost is None:
            return
        nanos = to_nanos(cost.total)
        for period in ("day", "month"):
            start, _ = period_window(period, charge.at)
            key = (principal, cost.currency, period, start)
            self._own[key] = self._own.get(key, 0) + nanos
        if self.alerts is not None:
            for key, _, budget in reservation.holds:
                spent = self._own.get(key, 0) + self._others.get(key, (0, 0.0))[0]
                self.alerts(principal, budget, spent, key[3])

    def spent(self, principal: str, currency: str, period: str, now: float | None = None) -> int:
        """Nanos this daemon has counted for the principal in the current period."""
        start, _ = period_window(period, self._clock() if now is None else now)
        key = (principal, currency, period, start)
        return self._own.get(key, 0) + self._others.get(key, (0, 0.0))[0]

    async def _others_spent(self, key: _Key, reset: float) -> int:
        held = self._others.get(key)
        if held is not None and self._clock() - held[1] < self._refresh_s:
            return held[0]
        pending = self._reading.get(key)
        if pending is None:  # one read per key at a time, shared by its waiters
            pending = asyncio.ensure_future(self._read_others(key, reset))
            self._reading[key] = pending
            pending.add_done_callback(lambda _: self._reading.pop(key, None))
        return await asyncio.shield(pending)

    async def _read_others(self, key: _Key, reset: float) -> int:
        principal, currency, _, start = key
        nanos: int = await self._store.spent(
            principal, currency, start, reset, excluding_instance=self.instance_id
        )
        self._others[key] = (nanos, self._clock())
        return nanos

    # --- cost rows --------------------------------------------------------

    def record(
        self,
        charges: Iterable[Charge],
        *,
        principal: str,
        tool: str,
        session_id: str,
        request_id: str,
        thread_id: str | None,
        trace_id: str | None = None,
    ) -> None:
        """Queue one row per charge for the store; never waits."""
        for charge in charges:
            cost, usage = charge.cost, charge.usage
            parts = () if cost is None else (cost.input, cost.cached_input, cost.output, cost.total)
            amounts = [to_nanos(part) for part in parts] or [0, 0, 0, 0]
            row = CostRow(
                charge.at, self.instance_id, principal, tool, session_id, request_id, thread_id,
                charge.model, charge.provider, usage.prompt_tokens, usage.cached_prompt_tokens,
                usage.completion_tokens, usage.reasoning_tokens,
                None if cost is None else cost.currency, *amounts, trace_id,
            )  # fmt: skip
            self._queue.append(row)
        if self._queue:
            self._wake.set()
            self._costs_queued.set()

    def log_call(self, row: CallLogRow) -> None:
        """Queue the call's row of the request log for the store; never waits."""
        self._calls.append(row)
        self._wake.set()

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def flush(self) -> None:
        """Write every queued row now, and prune the request log when it is due.

        One flush at a time (the writer's, or a caller's such as :meth:`aclose`): a
        row is taken off its queue only once it is written, so two flushes at once
        would write it twice, and a flush returns only once what was queued is in.
        """
        async with self._flushing:
            while self._queue:
                batch = self._queue[:_BATCH]
                await self._store.record_costs(batch)
                del self._queue[: len(batch)]
            while self._calls:
                calls = self._calls[: _BATCH * 4]
                await self._store.record_calls(calls)
                del self._calls[: len(calls)]
            now = self._clock()
            if self._call_log_s > 0 and now - self._pruned_at >= _PRUNE_EVERY_S:
                self._pruned_at = now
                await self._store.prune_call_log(now - self._call_log_s)

    async def _write_loop(self) -> None:
        delay = 0.05
        while True:
            await self._wake.wait()
            if not self._queue and not self._closing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._costs_queued.wait(), _GATHER_S)
            self._wake.clear()
            self._costs_queued.clear()
            try:
                await self.flush()
                delay = 0.05
            except Exception as exc:  # the store is down: keep the rows, try again
                if self._closing:
                    log.error("cost_rows_lost", error=str(exc), rows=len(self._queue),
                              calls=len(self._calls))  # fmt: skip
                    return
                log.warning("cost_rows_not_written", error=str(exc), queued=len(self._queue),
                            calls=len(self._calls))  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._wake.set()
            if self._closing:
                return

    async def aclose(self) -> None:
        """Write what is queued and stop the writer (call while the store is open).

        The writer is not cancelled: a batch cancelled during its write could
        be committed and then written again.
        """
        self._closing = True
        self._wake.set()
        self._costs_queued.set()
        if self._writer is not None:
            await self._writer
            self._writer = None
        elif self._queue or self._calls:
            await self.flush()


def charge_fields(charges: Iterable[Charge]) -> dict[str, Any]:
    """What a ``call_finished`` audit event says about the call's model calls: their
    usage summed, ``cost`` as results report it, and each one in ``charges`` (the
    Supabase spend views read these)."""
    charges = list(charges)
    if not charges:
        return {}
    usage = Usage()
    for charge in charges:
        usage.add(charge.usage)
    listed = []
    for charge in charges:
        entry: dict[str, Any] = {"model": charge.model, "provider": charge.provider,
                                 **charge.usage.as_dict()}  # fmt: skip
        if charge.cost is not None:
            entry.update(currency=charge.cost.currency, cost=float(charge.cost.total))
        listed.append(entry)
    spend = Spend(charge.cost for charge in charges)
    return {"usage": usage.as_dict(), **spend.as_metadata(), "charges": listed}


def _exceeded(
    principal: str, budget: Budget, spent: int, reserved: int, guess: Cost | None,
    reset: float, now: float,
) -> BudgetExceededError:  # fmt: skip
    resets_at = datetime.fromtimestamp(reset, UTC).isoformat(timespec="seconds")
    spent_d = from_nanos(spent).normalize()
    priced = guess is not None and guess.currency == budget.currency
    held = to_nanos(guess.total) if guess is not None and priced else 0
    left = to_nanos(budget.amount) - spent - reserved
    this_call = ""
    if left > 0 and guess is not None and priced:
        this_call = (f"; this call may cost up to {_money(guess.total)} {budget.currency} "
                     f"({_money(guess.output)} of it for a reply as long as its output cap), "
                     f"more than the {_money(from_nanos(left))} left: ask for a shorter reply "
                     "(max_tokens) or a cheaper model")  # fmt: skip
    return BudgetExceededError(
        f"principal {principal!r} has spent {_money(spent_d)} {budget.currency} of its budget "
        f"of {_money(budget.amount)} {budget.currency} per UTC {budget.period}"
        + (f" ({_money(from_nanos(reserved))} more held by calls in flight)" if reserved else "")
        + f"{this_call}; it resets at {resets_at}",
        retryable=False,
        retry_after_s=round(max(reset - now, 0.0), 3),
        details={
            "spent": float(spent_d),
            "in_flight": float(from_nanos(reserved)),
            "estimate": float(from_nanos(held)),
            "budget": float(budget.amount),
            "currency": budget.currency,
            "period": budget.period,
            "resets_at": resets_at,
            "time_zone": "UTC",
        },
    )


def _money(amount: Decimal) -> str:
    return f"{amount:.6f}".rstrip("0").rstrip(".") if amount else "0"
