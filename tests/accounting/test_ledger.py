"""The ledger against a real SQLite store: budgets exact under concurrent calls,
other daemons' spend counted, cost rows written off the call path."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest

from exai.accounting.budgets import Budget, period_window
from exai.accounting.ledger import Charge, Ledger
from exai.auth import Principal
from exai.errors import BudgetExceededError
from exai.protocol import ErrorCode
from exai.providers.base import Usage
from exai.providers.pricing import Cost
from exai.store.costs import CostRow
from exai.store.sqlite import SqliteStore

NOW = 1_790_000_000.0 + 3600.0  # 01:00 UTC
ALICE = Principal("alice")


def usd(amount: str) -> Cost:
    return Cost("USD", input=Decimal(amount))


@pytest.fixture
async def store(tmp_path: Path):
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    yield store
    await store.aclose()


def ledger_for(store: SqliteStore, budget: str = "1.00") -> Ledger:
    budgets = {"alice": Budget(Decimal(budget), "USD", "day")}
    return Ledger(store, budgets, instance_id="me", clock=lambda: NOW)


async def test_concurrent_calls_cannot_all_take_the_last_of_a_budget(store) -> None:
    ledger = ledger_for(store)

    async def try_admit():
        try:
            return await ledger.admit(ALICE, lambda: usd("0.30"))
        except BudgetExceededError:
            return None

    held = await asyncio.gather(*(try_admit() for _ in range(10)))
    admitted = [r for r in held if r is not None]
    assert len(admitted) == 3  # 3 x 0.30 fit in 1.00; a fourth would not
    # One call settles for less than it held: the difference becomes available.
    ledger.settle("alice", admitted[0], Charge("k2", "kimi", Usage(), usd("0.10"), at=NOW))
    assert ledger.spent("alice", "USD", "day") == 100_000_000
    assert await try_admit() is not None  # 0.10 spent + 0.60 held + 0.30 = 1.00
    assert await try_admit() is None


async def test_spend_of_other_daemons_counts_and_the_refusal_says_when_it_resets(store) -> None:
    start, reset = period_window("day", NOW)
    await store.record_costs(
        [
            CostRow(
                start + 5,
                "other-daemon",
                "alice",
                "chat",
                "s",
                "r",
                None,
                "k2",
                "kimi",
                1,
                0,
                1,
                0,
                "USD",
                0,
                0,
                0,
                950_000_000,
            )
        ]
    )
    ledger = ledger_for(store)
    with pytest.raises(BudgetExceededError) as refused:
        await ledger.admit(ALICE, lambda: usd("0.10"))
    info = refused.value.info()
    assert info.code == ErrorCode.BUDGET_EXCEEDED and not info.retryable
    assert info.retry_after_s == pytest.approx(reset - NOW)
    assert info.details["spent"] == 0.95 and info.details["budget"] == 1.0
    assert info.details["resets_at"].endswith("T00:00:00+00:00")
    assert "0.95 USD of its budget of 1 USD per UTC day" in info.message
    # Another principal, and a principal without a budget, are not affected.
    assert (await ledger.admit(Principal("bob"), lambda: usd("5"))).key is None


async def test_a_jwt_budget_wins_over_the_setting(store) -> None:
    ledger = ledger_for(store, budget="100")
    tight = Principal("alice", budget=Budget(Decimal("0.05"), "USD", "month"))
    with pytest.raises(BudgetExceededError, match="per UTC month"):
        await ledger.admit(tight, lambda: usd("0.10"))


async def test_rows_are_written_in_the_background_and_on_close(store) -> None:
    ledger = ledger_for(store)
    ledger.start()
    charge = Charge("k2", "kimi", Usage(prompt_tokens=10, cached_prompt_tokens=4,
                                        completion_tokens=3), usd("0.25"), at=NOW)  # fmt: skip
    ledger.record([charge, Charge("x", "glm", Usage(prompt_tokens=1), None, at=NOW)],
                  principal="alice", tool="chat", session_id="s", request_id="r1",
                  thread_id="t1")  # fmt: skip
    await ledger.aclose()
    lines = await store.usage_report(NOW - 10, NOW + 10, "thread")
    assert {(x.key, x.currency, x.calls, x.cost_total) for x in lines} == {
        ("t1", "USD", 1, 250_000_000), ("t1", None, 1, 0)}  # fmt: skip
    # Its own rows are not read back as another daemon's spend.
    assert await store.spent("alice", "USD", NOW - 10, NOW + 10, excluding_instance="me") == 0
