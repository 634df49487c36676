"""Budget overruns under concurrency: storms of calls near the end of a budget.

The attack run's case and its neighbours: a principal with a 0.01 USD daily
budget, of which 50%, 80%, 91% or 99% is already spent (rows of another daemon in
the shared store), fires 40 calls at once, with replies capped at 1, 4, 20 or 100
tokens (``completion``'s ``max_tokens``) or uncapped (``chat``, the model's 4,096
tokens). The provider emulator answers after 300 ms, so every call of a storm is
in flight at once, and the spend is read back from the store. Asserted: spend
never passes the budget (the stated bound for calls of one provider request is
1x; the finding's acceptance bound is 2x), and refused calls never reach the
provider. The daemon, the SDK and the store are real; see
``tests/accounting/test_budget_overrun.py`` for the fixture's prices.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.accounting.test_budget_overrun import BUDGET, CAPPED, UNCAPPED, storm
from tests.reliability.harness import scaled

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

SECTION = "attack_budget"
SPENT = [Decimal("0.005"), Decimal("0.008"), Decimal("0.0091"), Decimal("0.0099")]
SHAPES = [("max_tokens=1", {**CAPPED, "max_tokens": 1}), ("max_tokens=4", CAPPED),
          ("max_tokens=20", {**CAPPED, "max_tokens": 20}),
          ("max_tokens=100", {**CAPPED, "max_tokens": 100}),
          ("uncapped chat", UNCAPPED)]  # fmt: skip


async def test_storms_near_the_end_of_a_budget_never_pass_it(
    tmp_path, emulator, client_factory, figures
):
    calls = 40
    rounds = scaled(len(SPENT) * len(SHAPES), minimum=len(SHAPES))
    plan = [(spent, shape) for spent in SPENT for shape in SHAPES][:rounds]
    if rounds < len(SPENT) * len(SHAPES):  # the short run keeps the finding's case, 91%
        plan = [(Decimal("0.0091"), shape) for shape in SHAPES]
    totals = {"calls": 0, "admitted": 0, "refused": 0, "other_errors": 0, "provider_requests": 0}
    worst = Decimal(0)
    at_91: dict[str, str] = {}
    for i, (spent, (name, arguments)) in enumerate(plan):
        workdir = tmp_path / f"r{i}"
        workdir.mkdir()
        out = await storm(workdir, emulator, client_factory, arguments, calls, spent)
        for key in totals:
            totals[key] += calls if key == "calls" else out[key]
        assert out["other_errors"] == 0
        assert out["provider_requests"] == out["admitted"]  # refused calls sent nothing
        assert out["spent"] <= BUDGET, (spent, name, out)
        worst = max(worst, out["ratio"])
        if spent == Decimal("0.0091"):
            at_91[name] = f"{out['admitted']} admitted, spend {out['ratio']:.2f}x"
    assert worst < 2
    figures.record(SECTION, storms=len(plan), calls_per_storm=calls, **totals,
                   worst_spend_over_budget=f"{worst:.3f}x", at_91_percent=at_91,
                   budget="0.01 USD/day",
                   spent_before=sorted({f"{s / BUDGET:.0%}" for s, _ in plan}))  # fmt: skip
