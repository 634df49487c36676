"""What a model call costs: prices from the catalogue applied to a call's usage.

A :class:`Price` is the ``[models."<name>".price]`` sub-table of the catalogue:
a currency and three rates per million tokens (``input``, ``cached_input``,
``output``). :func:`call_cost` applies one to a :class:`~exai.providers.base.Usage`:
the prompt tokens the vendor billed at its cached rate (``cached_prompt_tokens``)
at ``cached_input``, the rest of ``prompt_tokens`` at ``input``, every
completion token (reasoning included, as the vendors bill it) at ``output``, and
each web search the vendor ran at ``web_search_call``. Cache writes, which Kimi K3
bills, cost its input rate: what every uncached prompt token is charged already.

Money is :class:`~decimal.Decimal`, never float: the rates are decimal numbers
as the vendors publish them, and the sum of many small costs must not drift.
Each part of one call's cost is rounded once, half-even, to a billionth of the
currency unit (:data:`QUANTUM`), the precision the store keeps (integer
*nanos*), so every later sum, in memory or in SQL, is exact and a total
recomputed from stored rows equals the one reported. A billionth is far below
any price step (the cheapest rate, a few hundredths per million tokens, is tens
of nanos per token), so the rounding never changes a figure anyone reads.

Costs in different currencies are never added: :class:`Spend` keeps one
:class:`Cost` per currency.

A rate is at most :data:`MAX_RATE` (a million per million tokens: one currency
unit a token, far above any real price). The bound keeps every cost a store can
hold: a call of ten million tokens at that rate is 10^16 nanos, and the
store's 64-bit sums have room for hundreds of such calls, where a rate of 1e300
would make every priced call fail after the provider had answered and billed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from exai.providers.base import Usage

__all__ = [
    "MAX_RATE",
    "QUANTUM",
    "Cost",
    "CurrencyMismatchError",
    "Price",
    "Spend",
    "call_cost",
    "from_nanos",
    "to_nanos",
]

QUANTUM = Decimal("0.000000001")
MAX_RATE = Decimal(1_000_000)  # per million tokens
_NANOS = Decimal(1_000_000_000)
_PER = Decimal(1_000_000)  # prices are per million tokens


class CurrencyMismatchError(ValueError):
    """Two costs in different currencies were added."""


class Price(BaseModel):
    """A model's rates, per million tokens, in one currency."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. USD")
    input: Decimal = Field(ge=0)
    cached_input: Decimal = Field(default=None, ge=0)  # type: ignore[assignment]
    output: Decimal = Field(ge=0)
    # What one web search the vendor runs costs, in currency units (not per million);
    # None: the vendor's fee is not known, and a cost with searches says so.
    web_search_call: Decimal | None = Field(default=None, ge=0, le=MAX_RATE)

    @field_validator("input", "cached_input", "output")
    @classmethod
    def _within_reason(cls, rate: Decimal) -> Decimal:
        if rate > MAX_RATE:
            raise ValueError(f"a rate is per million tokens and at most {MAX_RATE} "
                             f"(one currency unit a token); got {rate:.6g}")  # fmt: skip
        return rate

    @model_validator(mode="before")
    @classmethod
    def _cached_defaults_to_input(cls, data: Any) -> Any:
        # A vendor without a cached rate bills cached prompt tokens like any other.
        if isinstance(data, dict) and data.get("cached_input") is None and "input" in data:
            return {**data, "cached_input": data["input"]}
        return data

    def describe(self) -> dict[str, Any]:
        """What ``listmodels`` shows: the rates as numbers, per million tokens."""
        out = {"currency": self.currency, "input": float(self.input),
               "cached_input": float(self.cached_input), "output": float(self.output),
               "per": "1M tokens"}  # fmt: skip
        if self.web_search_call is not None:
            out["web_search_call"] = float(self.web_search_call)
        return out


def _part(tokens: int, rate: Decimal) -> Decimal:
    return (Decimal(max(tokens, 0)) * rate / _PER).quantize(QUANTUM, rounding=ROUND_HALF_EVEN)


def to_nanos(amount: Decimal) -> int:
    """An amount as the integer billionths the store keeps (exact after :func:`call_cost`)."""
    return int((amount * _NANOS).to_integral_value(rounding=ROUND_HALF_EVEN))


def from_nanos(nanos: int) -> Decimal:
    return (Decimal(int(nanos)) / _NANOS).quantize(QUANTUM)


@dataclass(frozen=True, slots=True)
class Cost:
    """What one call (or a sum of calls) cost, in one currency."""

    currency: str
    input: Decimal = Decimal(0)
    cached_input: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    # Per-call fees of the vendor's own tools (web search), beside the tokens.
    tools: Decimal = Decimal(0)

    @property
    def total(self) -> Decimal:
        return self.input + self.cached_input + self.output + self.tools

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        if other.currency != self.currency:
            raise CurrencyMismatchError(
                f"cannot add a cost in {other.currency} to one in {self.currency}"
            )
        return Cost(self.currency, self.input + other.input,
                    self.cached_input + other.cached_input, self.output + other.output,
                    self.tools + other.tools)  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """The result metadata's ``cost``: amounts as floats in currency units."""
        out = {"currency": self.currency, "input": float(self.input),
               "cached_input": float(self.cached_input), "output": float(self.output),
               "total": float(self.total)}  # fmt: skip
        if self.tools:
            out["tools"] = float(self.tools)
        return out


def call_cost(price: Price, usage: Usage) -> Cost:
    """The cost of one call that used ``usage`` at ``price``.

    Cached tokens are part of ``prompt_tokens``; a vendor reporting more cached
    tokens than prompt tokens is believed only up to the prompt.
    """
    cached = min(max(usage.cached_prompt_tokens, 0), max(usage.prompt_tokens, 0))
    fee = price.web_search_call or Decimal(0)
    return Cost(
        price.currency,
        input=_part(usage.prompt_tokens - cached, price.input),
        cached_input=_part(cached, price.cached_input),
        output=_part(usage.completion_tokens, price.output),
        tools=(fee * max(usage.web_searches, 0)).quantize(QUANTUM, rounding=ROUND_HALF_EVEN),
    )


class Spend:
    """Costs summed per currency, and whether any call had no price.

    The result of a call that made several model calls (consensus, fallbacks)
    reports one of these.
    """

    __slots__ = ("_by_currency", "unpriced")

    def __init__(self, costs: Iterable[Cost | None] = ()) -> None:
        self._by_currency: dict[str, Cost] = {}
        self.unpriced = 0  # calls whose model has no price
        for cost in costs:
            self.add(cost)

    def add(self, cost: Cost | None) -> None:
        if cost is None:
            self.unpriced += 1
            return
        held = self._by_currency.get(cost.currency)
        self._by_currency[cost.currency] = cost if held is None else held + cost

    def __iter__(self) -> Iterator[Cost]:
        return iter(self._by_currency.values())

    def __len__(self) -> int:
        return len(self._by_currency)

    def get(self, currency: str) -> Cost | None:
        return self._by_currency.get(currency)

    def as_metadata(self) -> dict[str, Any]:
        """``cost`` (one currency's dict, or None when nothing was priced) and,
        only when a call spent in several currencies, ``costs`` with each of them
        (then ``cost`` is None: no single figure would be true). When some model
        calls had no price, ``unpriced_calls`` says how many the figures leave out."""
        costs = [cost.as_dict() for cost in self._by_currency.values()]
        out: dict[str, Any] = {"cost": costs[0] if len(costs) == 1 else None}
        if len(costs) > 1:
            out["costs"] = sorted(costs, key=lambda c: c["currency"])
        if costs and self.unpriced:
            out["unpriced_calls"] = self.unpriced
        return out
