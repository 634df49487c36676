"""Reading the settings whose values are small languages of their own.

``EXAI_BUDGETS`` (``alice=5 USD/day,*=100 USD/month``),
``EXAI_MEMORY_TYPE_WEIGHTS`` (``rule=1.5,decision=1.3``) and ``EXAI_WS_TOKENS``
(``alice=tok1,bob=tok2``) are parsed here, beside the settings, so that a bad
value stops start-up (and ``exai config``) with the variable's name, and so that
the modules that use them (:mod:`exai.accounting`, :mod:`exai.memory`,
:mod:`exai.auth`) import the parsing from the settings rather than the settings
from them. A JWT's ``exai_budget`` claim is read by the same :func:`parse_budget`.

Each parser raises ``ValueError`` naming what is wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

__all__ = [
    "Budget",
    "Period",
    "parse_budget",
    "parse_budgets",
    "parse_token_list",
    "parse_type_weights",
]

Period = Literal["day", "month"]
_PERIODS: tuple[str, ...] = ("day", "month")


@dataclass(frozen=True, slots=True)
class Budget:
    """An amount a principal may spend in one currency per UTC day or month."""

    amount: Decimal
    currency: str
    period: Period

    def describe(self) -> str:
        return f"{self.amount} {self.currency} per UTC {self.period}"


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


def parse_type_weights(text: str) -> dict[str, float]:
    """``"rule=1.5,decision=1.3"`` -> ``{"rule": 1.5, "decision": 1.3}``; raises ValueError."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected type=weight, got {part.strip()!r}")
        number = float(value)
        if not math.isfinite(number) or number <= 0:
            raise ValueError(f"the weight of {name.strip()!r} must be a positive number")
        weights[name.strip()] = number
    return weights


def parse_token_list(spec: str) -> dict[str, str]:
    """``"alice=tok1,bob=tok2"`` -> ``{"tok1": "alice", "tok2": "bob"}``.

    The message of the ``ValueError`` a bad entry raises says which entry and what
    it should look like, never the entry itself: it holds a token.
    """
    out: dict[str, str] = {}
    entries = [part.strip() for part in spec.split(",") if part.strip()]
    for number, part in enumerate(entries, start=1):
        name, sep, token = part.partition("=")
        if not sep or not name.strip() or not token.strip():
            raise ValueError(
                f"entry {number} of {len(entries)} is not principal=token; expected "
                "alice=token1,bob=token2 (a token alone goes in EXAI_WS_TOKEN)"
            )
        out[token.strip()] = name.strip()
    return out
