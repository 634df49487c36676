"""Spending budgets: what a principal may spend per UTC day or month, and the rule.

A :class:`Budget` is an amount in one currency per period. Periods are
calendar periods in UTC: a day budget resets at 00:00 UTC, a month budget at
00:00 UTC on the first of the month, whatever the daemon's or the caller's
time zone, so every daemon sharing a store agrees on when spend restarts.

Budgets come from ``EXAI_BUDGETS`` (``principal=amount CUR/period``, comma
separated; ``*`` is every principal without an entry of its own) or from a
JWT's ``exai_budget`` claim ``{amount, currency, period}``, which wins for its
principal.

:func:`judge` is the rule, kept free of any clock or store: a call is refused
when what the principal has spent in the period, plus what its calls still
running hold, plus what this call would hold, would exceed the budget; and
always once the spend has reached it.

A call holds the most it can cost at the chosen model's price: its prompt's
tokens at the uncached input rate (the token estimate never undercounts) and a
reply as long as its output cap (the caller's ``max_tokens``, else the model's
``max_output_tokens``) at the output rate. When it settles, the hold is
replaced by what the call cost and the rest is free again. A budgeted call's
reply is not continued past its cap (see :func:`exai.tools.turn.ask_model`).

**The bound**: spend in a period stays within the budget (1x) for every model
call that is one provider request at the model chosen, whatever the
concurrency, since the holds of the calls admitted never add up to more than
what was left. Two things a hold cannot know can take a call past it: a
web-search round trip (Kimi's ``$web_search``: the search results come back as
prompt tokens of the next request, up to three rounds per call), and a fallback
model priced above the model chosen. The price of the bound: a call whose hold
is more than what is left of the budget is refused even though its actual
reply might have fitted; ask for a shorter reply (``max_tokens``) or a cheaper
model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

__all__ = ["Budget", "Period", "judge", "parse_budget", "parse_budgets", "period_window"]

Period = Literal["day", "month"]
_PERIODS: tuple[str, ...] = ("day", "month")


@dataclass(frozen=True, slots=True)
class Budget:
    amount: Decimal
    currency: str
    period: Period

    def describe(self) -> str:
        return f"{self.amount} {self.currency} per UTC {self.period}"


def period_window(period: Period, now: float) -> tuple[float, float]:
    """The UTC period holding ``now`` (epoch seconds) as ``[start, reset)`` epoch seconds."""
    moment = datetime.fromtimestamp(now, UTC)
    if period == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        end = datetime.fromordinal(start.toordinal() + 1).replace(tzinfo=UTC)
    else:
        start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
        end = start.replace(year=year, month=month)
    return start.timestamp(), end.timestamp()


def judge(budget: Budget, spent: Decimal, reserved: Decimal, estimate: Decimal) -> bool:
    """True when a call may run: see the module's docstring for the rule."""
    committed = spent + reserved
    return committed < budget.amount and committed + estimate <= budget.amount


def parse_budget(value: Any, where: str = "budget") -> Budget:
    """A budget from ``{"amount", "currency", "period"}`` or ``"5 USD/day"``.

    Raises ``ValueError`` naming ``where`` and what is wrong.
    """
    if isinstance(value, str):
        amount_text, _, rest = value.strip().partition(" ")
        currency, slash, period = rest.strip().partition("/")
        if not slash:
            raise ValueError(f"{where}: {value!r} must look like '5 USD/day' or '100 EUR/month'")
        value = {"amount": amount_text, "currency": currency, "period": period}
    if not isinstance(value, dict) or set(value) != {"amount", "currency", "period"}:
        raise ValueError(f"{where}: must be an object with exactly amount, currency and period")
    raw = value["amount"]
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError(f"{where}: amount must be a number")
    try:
        amount = Decimal(str(raw).strip())
    except InvalidOperation:
        raise ValueError(f"{where}: amount {raw!r} is not a number") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{where}: amount must be a finite number >= 0")
    currency = value["currency"]
    if not isinstance(currency, str) or len(currency.strip()) != 3 or not currency.isalpha():
        raise ValueError(f"{where}: currency must be a three-letter code such as USD")
    period = value["period"]
    if period not in _PERIODS:
        raise ValueError(f"{where}: period must be 'day' or 'month', not {period!r}")
    return Budget(amount, currency.strip().upper(), period)


def parse_budgets(spec: str) -> dict[str, Budget]:
    """``"alice=5 USD/day, *=100 USD/month"`` -> budgets by principal (``*``: the rest)."""
    out: dict[str, Budget] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, text = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"EXAI_BUDGETS entry {part!r} must look like principal=5 USD/day")
        name = name.strip()
        if name in out:
            raise ValueError(f"EXAI_BUDGETS names {name!r} twice")
        out[name] = parse_budget(text, f"EXAI_BUDGETS entry {name!r}")
    return out
