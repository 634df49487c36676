"""Budgets: parsing, the UTC period windows and the admission rule (no clock, no store)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from exai.accounting.budgets import Budget, judge, parse_budget, parse_budgets, period_window
from exai.auth import Authenticator, issue_token
from exai.errors import UnauthorizedError


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_day_and_month_windows_are_utc_calendar_periods() -> None:
    assert period_window("day", ts("2026-11-23T23:59:59")) == (ts("2026-11-23"), ts("2026-11-24"))
    assert period_window("month", ts("2026-12-31T12:00")) == (ts("2026-12-01"), ts("2027-01-01"))
    assert period_window("month", ts("2028-02-29T00:00")) == (ts("2028-02-01"), ts("2028-03-01"))


def test_the_rule_refuses_at_the_budget_and_when_the_prompt_would_pass_it() -> None:
    budget = Budget(Decimal("1.00"), "USD", "day")
    assert judge(budget, Decimal("0.50"), Decimal(0), Decimal("0.50"))
    assert not judge(budget, Decimal("0.50"), Decimal(0), Decimal("0.51"))
    assert not judge(budget, Decimal("0.60"), Decimal("0.40"), Decimal(0))  # held by calls
    assert not judge(budget, Decimal("1.00"), Decimal(0), Decimal(0))  # spent: refused
    assert not judge(Budget(Decimal(0), "USD", "day"), Decimal(0), Decimal(0), Decimal(0))


def test_budgets_setting_parses_and_rejects_clearly() -> None:
    budgets = parse_budgets("alice=5 USD/day, *=100.50 eur/month")
    assert budgets == {"alice": Budget(Decimal(5), "USD", "day"),
                       "*": Budget(Decimal("100.50"), "EUR", "month")}  # fmt: skip
    for bad, match in [
        ("alice", "principal="),
        ("alice=5 USD", "5 USD/day"),
        ("alice=-1 USD/day", ">= 0"),
        ("alice=5 USD/week", "period"),
        ("alice=x USD/day", "not a number"),
        ("a=1 USD/day,a=2 USD/day", "twice"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_budgets(bad)


def test_a_jwt_budget_claim_becomes_the_principals_budget() -> None:
    auth = Authenticator(jwt_secret="s" * 32)
    budget = Budget(Decimal("2.5"), "USD", "month")
    principal = auth.authenticate(issue_token("s" * 32, "carol", budget=budget))
    assert principal.name == "carol" and principal.budget == budget
    assert auth.authenticate(issue_token("s" * 32, "dave")).budget is None


def test_a_malformed_budget_claim_refuses_the_token() -> None:
    import jwt

    token = jwt.encode({"sub": "x", "exp": 4102444800, "exai_budget": {"amount": "lots"}},
                       "s" * 32, algorithm="HS256")  # fmt: skip
    with pytest.raises(UnauthorizedError, match="exai_budget"):
        Authenticator(jwt_secret="s" * 32).authenticate(token)
    assert parse_budget({"amount": 1, "currency": "usd", "period": "day"}).currency == "USD"
