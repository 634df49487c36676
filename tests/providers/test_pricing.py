"""Prices in the catalogue and the cost of a call: exact, per currency, validated."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from exai.providers.base import Usage
from exai.providers.catalogue import CatalogueError, load_catalogue
from exai.providers.pricing import (
    Cost,
    CurrencyMismatchError,
    Price,
    Spend,
    call_cost,
    from_nanos,
    to_nanos,
)

PRICED = """
[models."kimi-k2.7-code".price]
currency = "USD"
input = 0.60
cached_input = 0.15
output = 2.50

[models."glm-4.6".price]
currency = "CNY"
input = "2"
output = "8"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_cached_prompt_tokens_are_billed_at_the_cached_rate() -> None:
    price = Price(currency="USD", input=0.60, cached_input=0.15, output=2.50)
    usage = Usage(prompt_tokens=10_000, cached_prompt_tokens=8_000, completion_tokens=1_000,
                  reasoning_tokens=400)  # fmt: skip
    cost = call_cost(price, usage)
    # 2,000 uncached at 0.60/M, 8,000 cached at 0.15/M, 1,000 out (reasoning included) at 2.50/M.
    assert cost == Cost("USD", Decimal("0.0012"), Decimal("0.0012"), Decimal("0.0025"))
    assert cost.total == Decimal("0.0049")
    assert cost.as_dict() == {"currency": "USD", "input": 0.0012, "cached_input": 0.0012,
                              "output": 0.0025, "total": 0.0049}  # fmt: skip


def test_cached_input_defaults_to_input_and_rates_are_exact_decimals() -> None:
    price = Price(currency="EUR", input=0.1, output=0.3)
    assert price.cached_input == price.input == Decimal("0.1")
    # 0.1 is not a binary fraction; a million single tokens still sum to exactly 0.1.
    one = call_cost(price, Usage(prompt_tokens=1))
    total = sum((one for _ in range(1_000_000)), Cost("EUR"))
    assert total.input == Decimal("0.1")


def test_web_searches_cost_their_per_call_fee_beside_the_tokens() -> None:
    price = Price(currency="USD", input=1, output=2, web_search_call="0.005")
    cost = call_cost(price, Usage(prompt_tokens=1_000, completion_tokens=500, web_searches=3))
    assert cost.tools == Decimal("0.015")
    assert cost.total == Decimal("0.001") + Decimal("0.001") + Decimal("0.015")
    assert cost.as_dict()["tools"] == 0.015 and cost.as_dict()["total"] == 0.017
    assert (cost + cost).tools == Decimal("0.030")
    assert price.describe()["web_search_call"] == 0.005
    # No searches, or no confirmed fee: no tools part at all.
    assert "tools" not in call_cost(price, Usage(prompt_tokens=1)).as_dict()
    unpriced = Price(currency="USD", input=1, output=2)
    assert call_cost(unpriced, Usage(web_searches=2)).tools == 0
    assert "web_search_call" not in unpriced.describe()
    with pytest.raises(ValueError):
        Price(currency="USD", input=1, output=2, web_search_call=-1)


def test_each_part_is_rounded_once_to_a_billionth() -> None:
    cost = call_cost(Price(currency="USD", input="0.0375", output=0), Usage(prompt_tokens=1))
    assert cost.input == Decimal("0.000000038")  # 3.75e-8, half-even to 1e-9
    assert to_nanos(cost.input) == 38 and from_nanos(38) == cost.input


def test_more_cached_than_prompt_tokens_is_believed_only_up_to_the_prompt() -> None:
    cost = call_cost(Price(currency="USD", input=1, cached_input=0, output=0),
                     Usage(prompt_tokens=100, cached_prompt_tokens=500))  # fmt: skip
    assert cost.input == 0 and cost.cached_input == 0


@pytest.mark.parametrize("bad", [{"input": -1}, {"currency": "usd"}, {"currency": "US"},
                                 {"cached_input": -0.1}, {"unknown": 1}])  # fmt: skip
def test_invalid_prices_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        Price(**{"currency": "USD", "input": 1, "output": 2, **bad})


def test_costs_in_different_currencies_never_add() -> None:
    usd, cny = Cost("USD", Decimal(1)), Cost("CNY", Decimal(2))
    with pytest.raises(CurrencyMismatchError):
        _ = usd + cny
    spend = Spend([usd, cny, usd, None])
    assert spend.get("USD") == Cost("USD", Decimal(2)) and spend.unpriced == 1
    meta = spend.as_metadata()
    assert meta["cost"] is None and [c["currency"] for c in meta["costs"]] == ["CNY", "USD"]
    assert meta["unpriced_calls"] == 1
    assert Spend([usd]).as_metadata() == {"cost": usd.as_dict()}
    assert Spend([None]).as_metadata() == {"cost": None}


def test_a_models_file_gives_prices_and_listmodels_shows_them(tmp_path: Path) -> None:
    catalogue = load_catalogue(write(tmp_path, PRICED))
    kimi = catalogue.get("kimi-k2.7-code")
    assert kimi.price == Price(currency="USD", input="0.60", cached_input="0.15", output="2.50")
    assert catalogue.get("glm-4.6").price.cached_input == Decimal(2)
    assert kimi.describe()["price"] == {"currency": "USD", "input": 0.6, "cached_input": 0.15,
                                        "output": 2.5, "per": "1M tokens"}  # fmt: skip


def test_a_user_price_changes_only_the_rates_it_names(tmp_path: Path) -> None:
    base = write(tmp_path, PRICED)
    builtin = tmp_path / "more.toml"
    builtin.write_text('[models."kimi-k2.7-code".price]\noutput = 3.0\n')
    # Two files cannot be stacked, so the override is checked through the merge itself.
    from exai.providers.catalogue import _merge, _parse

    merged = _merge(_parse(base.read_text(), "base"), _parse(builtin.read_text(), "user"), "user")
    assert merged["models"]["kimi-k2.7-code"]["price"] == {
        "currency": "USD", "input": 0.60, "cached_input": 0.15, "output": 3.0}  # fmt: skip


def test_a_bad_price_stops_loading_and_names_the_model(tmp_path: Path) -> None:
    path = write(tmp_path, '[models."glm-4.6".price]\ncurrency = "USD"\ninput = -1\noutput = 1\n')
    with pytest.raises(CatalogueError, match=r"glm-4\.6.*price\.input"):
        load_catalogue(path)


@pytest.mark.parametrize(("field", "value"), [("output", "1e300"), ("input", "1000001"),
                                              ("cached_input", "1e7"), ("output", "inf"),
                                              ("input", "nan")])  # fmt: skip
def test_an_absurd_price_stops_loading_and_names_the_model_and_field(
    tmp_path: Path, field: str, value: str
) -> None:
    """A rate of 1e300 used to load, then fail every priced call after the provider
    had answered and billed it; it is now a catalogue error at start-up."""
    path = write(tmp_path, f'[models."kimi-k2.6".price]\n{field} = {value}\n')
    with pytest.raises(CatalogueError, match=rf"kimi-k2\.6.*price\.{field}") as refused:
        load_catalogue(path)
    assert "per million tokens" in str(refused.value) or "finite" in str(refused.value)


def test_the_dearest_price_allowed_still_costs_a_huge_call_exactly(tmp_path: Path) -> None:
    path = write(tmp_path, '[models."kimi-k2.6".price]\ninput = 1000000\noutput = 1000000\n')
    price = load_catalogue(path).get("kimi-k2.6").price
    cost = call_cost(price, Usage(prompt_tokens=10_000_000, completion_tokens=262_144))
    assert to_nanos(cost.total) == 10_262_144 * 10**9 < 2**63
