"""What a principal may spend, how fast it may call and which models it may use, now.

Three sources, and the rule that combines them (:func:`effective`):

* the **key** it presented: :class:`~exai.auth.Principal`'s ``budget``,
  ``rate_per_min`` and ``models`` (an operator's key, or a JWT's ``exai_budget``
  and ``exai_models`` claims);
* the **principal's overrides**, set at run time with ``exai limits set`` or
  ``/admin/limits`` and kept in the store's ``principal_limits`` table
  (:mod:`exai.store.limits`);
* the **environment's defaults**: ``EXAI_BUDGETS``, ``EXAI_RATE_LIMIT_PER_MIN``
  (every model when neither key nor principal names any).

When the key and the principal both set a value, the stricter wins: both budgets
are enforced (the smaller, when they count the same currency and period), the
lower rate, the models in both lists. When only one sets it, that one replaces
the environment's default, which applies only when neither does.

:class:`LimitBook` keeps every principal's overrides in memory and reads the
table again when its change marker moves, polling every ``poll_s`` (a cheap
query of two numbers), so a change reaches every daemon on the store within
about that delay, without a restart. Nothing on a call's path waits on it.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from exai.logs import get_logger
from exai.settings.values import Budget, parse_budget

if TYPE_CHECKING:
    from exai.auth import Principal

__all__ = [
    "Effective",
    "LimitBook",
    "Overrides",
    "burst_for",
    "effective",
    "merged",
    "parse_rate",
    "stricter_budgets",
]

log = get_logger("exai.accounting")

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*$")
_PER_MIN = {"s": 60.0, "sec": 60.0, "second": 60.0, "m": 1.0, "min": 1.0, "minute": 1.0,
            "h": 1 / 60, "hour": 1 / 60, None: 1.0}  # fmt: skip


def parse_rate(text: str) -> float:
    """Calls per minute from ``"600/min"``, ``"10/s"``, ``"36000/hour"`` or ``"600"``."""
    match = _RATE.match(text)
    if match is None:
        raise ValueError(f"rate {text!r} must look like 600/min, 10/s or 36000/hour")
    rate = float(match.group(1)) * _PER_MIN[match.group(2)]
    if rate <= 0:
        raise ValueError(f"rate {text!r} must be more than zero")
    return rate


@dataclass(frozen=True, slots=True)
class Overrides:
    """One principal's run-time overrides; None: not set here."""

    principal: str
    budget: Budget | None = None
    rate_per_min: float | None = None
    models: frozenset[str] | None = None
    updated_at: float = 0.0
    updated_by: str | None = None

    def public(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "budget": None if self.budget is None else
            f"{self.budget.amount} {self.budget.currency}/{self.budget.period}",
            "rate_per_min": self.rate_per_min,
            "models": None if self.models is None else sorted(self.models),
            "updated_at": self.updated_at,
            "updated_by": self.updated_by,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Effective:
    """What applies to one request: budgets (all enforced), calls a minute (0: no
    limit) and the models allowed (None: every model)."""

    budgets: tuple[Budget, ...]
    rate_per_min: float
    models: frozenset[str] | None


def stricter_budgets(budgets: Iterable[Budget | None]) -> tuple[Budget, ...]:
    """Every budget given, the smaller of two that count the same currency and period."""
    kept: dict[tuple[str, str], Budget] = {}
    for budget in budgets:
        if budget is None:
            continue
        key = (budget.currency, budget.period)
        if key not in kept or budget.amount < kept[key].amount:
            kept[key] = budget
    return tuple(kept.values())


def effective(
    principal: Principal,
    overrides: Overrides | None,
    *,
    default_budget: Budget | None,
    default_rate: float,
) -> Effective:
    """The rule of the module's docstring, for one request of ``principal``."""
    own = overrides or Overrides(principal.name)
    budgets = stricter_budgets((principal.budget, own.budget))
    if not budgets and default_budget is not None:
        budgets = (default_budget,)
    rates = [r for r in (principal.rate_per_min, own.rate_per_min) if r is not None]
    rate = min(rates) if rates else default_rate
    models = principal.models
    if own.models is not None:
        models = own.models if models is None else models & own.models
    return Effective(budgets, float(rate), models)


def burst_for(rate_per_min: float, default_rate: float, default_burst: int) -> int:
    """The burst that goes with a principal's own rate: the default burst scaled by
    its rate over the default (the same seconds of calls at once), at least one."""
    if default_rate > 0:
        return max(1, math.ceil(default_burst * rate_per_min / default_rate))
    return max(default_burst, math.ceil(rate_per_min / 6.0))


_UNSET = (None, "", "none", "default")


def merged(row: Any, principal: str, changes: Mapping[str, Any], catalogue: Any, *,
           by: str | None, now: float) -> Any:  # fmt: skip
    """The store row (:class:`exai.store.limits.LimitRow`) of ``principal`` with
    ``changes`` made: ``budget`` (``"5 USD/day"`` or ``{amount, currency, period}``),
    ``rate`` (``"600/min"`` or calls a minute) and ``models`` (names or aliases, a
    list or comma-separated; ``"all"``: every model); a value of None, ``""``,
    ``"none"`` or ``"default"`` puts it back to the default, and what is not named is
    kept. ``ValueError`` names what cannot be used."""
    from exai.store.limits import LimitRow

    unknown = set(changes) - {"budget", "rate", "models"}
    if unknown:
        raise ValueError(f"unknown limits {sorted(unknown)}; known: budget, rate, models")
    out = row or LimitRow(principal)
    if "budget" in changes:
        value = changes["budget"]
        if _unset(value):
            out = replace(out, budget_amount=None, budget_currency=None, budget_period=None)
        else:
            budget = parse_budget(value, "budget")
            out = replace(out, budget_amount=str(budget.amount), budget_currency=budget.currency,
                          budget_period=budget.period)  # fmt: skip
    if "rate" in changes:
        value = changes["rate"]
        if _unset(value):
            rate = None
        elif isinstance(value, int | float) and not isinstance(value, bool):
            rate = parse_rate(str(value))
        elif isinstance(value, str):
            rate = parse_rate(value)
        else:
            raise ValueError("rate must look like 600/min, or be calls a minute")
        out = replace(out, rate_per_min=rate)
    if "models" in changes:
        value = changes["models"]
        if _unset(value) or (isinstance(value, str) and value.strip().lower() in ("all", "*")):
            out = replace(out, models=None)
        else:
            out = replace(out, models=_model_names(value, catalogue))
    return replace(out, updated_at=now, updated_by=by)


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _UNSET)


def _model_names(value: Any, catalogue: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError("models must be model names, a list or comma-separated, or 'all'")
    names = []
    for name in (n.strip() for n in value):
        if not name:
            continue
        info = catalogue.get(name)
        if info is None:
            raise ValueError(f"models: unknown model {name!r}; known: "
                             f"{', '.join(catalogue.names())}")  # fmt: skip
        names.append(info.name)
    if not names:
        raise ValueError("models: name at least one model, or 'all'")
    return tuple(dict.fromkeys(names))


def overrides_of(row: Any) -> Overrides:
    """A store row (:class:`exai.store.limits.LimitRow`) as overrides."""
    budget = None
    if row.budget_amount is not None:
        budget = parse_budget({"amount": row.budget_amount, "currency": row.budget_currency,
                               "period": row.budget_period}, "principal_limits")  # fmt: skip
    models = None if row.models is None else frozenset(row.models)
    return Overrides(row.principal, budget, row.rate_per_min, models,
                     row.updated_at, row.updated_by)  # fmt: skip


class LimitBook:
    """Every principal's overrides, as this daemon last read them from the store."""

    def __init__(
        self,
        store: Any,
        *,
        default_budgets: Mapping[str, Budget] | None = None,
        default_rate: float = 0.0,
        poll_s: float = 0.5,
    ) -> None:
        self._store = store
        self._defaults = dict(default_budgets or {})
        self.default_rate = default_rate
        self.poll_s = poll_s
        self._overrides: dict[str, Overrides] = {}
        self._marker: tuple[int, float] | None = None
        self._task: asyncio.Task[None] | None = None
        self.changes = 0  # how many times the table was read again

    @property
    def supported(self) -> bool:
        return hasattr(self._store, "limits_marker")

    def overrides(self, principal: str) -> Overrides | None:
        return self._overrides.get(principal)

    def listed(self) -> list[Overrides]:
        return [self._overrides[name] for name in sorted(self._overrides)]

    def default_budgets(self) -> dict[str, Budget]:
        return dict(self._defaults)

    def default_budget(self, principal: str) -> Budget | None:
        return self._defaults.get(principal) or self._defaults.get("*")

    def rate_for(self, principal: Principal) -> float | None:
        """The principal's own calls a minute (key and override, the lower), or None
        when neither sets one and ``EXAI_RATE_LIMIT_PER_MIN`` applies. On every call."""
        own = self._overrides.get(principal.name) if self._overrides else None
        key, mine = principal.rate_per_min, None if own is None else own.rate_per_min
        if key is None:
            return mine
        return key if mine is None else min(key, mine)

    def models_for(self, principal: Principal) -> frozenset[str] | None:
        """The models ``principal`` may use now (None: every model)."""
        own = self._overrides.get(principal.name) if self._overrides else None
        if own is None or own.models is None:
            return principal.models
        return own.models if principal.models is None else principal.models & own.models

    def effective(self, principal: Principal) -> Effective:
        return effective(principal, self._overrides.get(principal.name),
                         default_budget=self.default_budget(principal.name),
                         default_rate=self.default_rate)  # fmt: skip

    async def refresh(self) -> bool:
        """Read the table again if it changed; True when it did."""
        if not self.supported:
            return False
        marker = await self._store.limits_marker()
        if marker == self._marker:
            return False
        rows = await self._store.principal_limits()
        read: dict[str, Overrides] = {}
        for row in rows:
            try:
                read[row.principal] = overrides_of(row)
            except ValueError as exc:  # a row written by hand: keep the defaults for it
                log.warning("principal_limits_row_invalid", principal=row.principal,
                            error=str(exc))  # fmt: skip
        self._overrides, self._marker = read, marker
        self.changes += 1
        return True

    def start(self) -> None:
        if self._task is None and self.supported:
            self._task = asyncio.get_running_loop().create_task(self._poll(), name="exai-limits")

    async def _poll(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # the store is down: keep what was read
                log.warning("principal_limits_unreadable", error=str(exc))
            await asyncio.sleep(self.poll_s)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


def budget_text(budget: Budget) -> str:
    return f"{Decimal(budget.amount).normalize():f} {budget.currency}/{budget.period}"
