"""Spending budgets: what a principal may spend per UTC day or month, and the rule.

A :class:`Budget` is an amount in one currency per period. Periods are
calendar periods in UTC: a day budget resets at 00:00 UTC, a month budget at
00:00 UTC on the first of the month, whatever the daemon's or the caller's
time zone, so every daemon sharing a store agrees on when spend restarts.

Budgets come from ``EXAI_BUDGETS`` (``principal=amount CUR/period``, comma
separated; ``*`` is every principal without an entry of its own) or from a
JWT's ``exai_budget`` claim ``{amount, currency, period}``, which wins for its
principal; both are read by :mod:`exai.settings.values`.

:func:`judge` is the rule, kept free of any clock or store: a call is refused
when what the principal has spent in the period, plus what its calls still
running hold, plus what this call would hold, would exceed the budget; and
always once the spend has reached it.

A call holds the most it can cost at the chosen model's price: its prompt as the
vendor will get it (the reasoning exai puts back on a caller's tool rounds included)
at the uncached input rate (the token estimate never undercounts), a reply as long
as its output cap (the caller's ``max_tokens``, else the model's
``max_output_tokens``) at the output rate, and the fee of each web search it may
make. When it settles, the hold is replaced by what the call cost and the rest is
free again. A budgeted call's reply is not continued past its cap (see
:func:`exai.tools.turn.ask_model`).

**The bound**: spend in a period stays within the budget (1x) for every model
call that is one provider request at the model chosen, whatever the
concurrency, since the holds of the calls admitted never add up to more than
what was left. What a hold cannot know can take a call past it: the search
results of a web-search round trip (Kimi's ``$web_search`` returns them as
prompt tokens of the next request, up to three rounds per call), a search fee the
catalogue has no price for, and a fallback model priced above the model chosen;
docs/cost.md lists each with its bound. The price of the bound: a call whose hold
is more than what is left of the budget is refused even though its actual
reply might have fitted; ask for a shorter reply (``max_tokens``) or a cheaper
model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

# A budget and its parsing are the settings' (EXAI_BUDGETS); a JWT's claim is read alike.
from exai.settings.values import Budget, Period, parse_budget, parse_budgets

__all__ = ["Budget", "Period", "judge", "parse_budget", "parse_budgets", "period_window"]


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
