"""Cost rows in the store: written in one transaction, summed exactly, on both backends."""

from __future__ import annotations

import pytest

from exai.errors import ValidationError_
from exai.store.costs import CostRow
from tests.store.conftest import StoreFactory

DAY = 86400.0
T0 = 1_790_000_000.0  # 2026-09-21 UTC


def row(at: float, principal: str, tool: str, model: str, *, cost: int | None = 1000,
        thread: str | None = None, instance: str = "i1") -> CostRow:  # fmt: skip
    currency = None if cost is None else "USD"
    nanos = cost or 0
    return CostRow(at, instance, principal, tool, "s", "r", thread, model, "kimi", 100, 40, 10, 2,
                   currency, nanos // 2, nanos // 4, nanos // 4, nanos)  # fmt: skip


async def test_usage_report_groups_and_sums_exactly(store_factory: StoreFactory) -> None:
    store = await store_factory()
    await store.record_costs([  # type: ignore[attr-defined]
        row(T0, "alice", "chat", "k2", thread="t1"),
        row(T0 + 1, "alice", "consensus", "glm", thread="t1"),
        row(T0 + 2, "bob", "chat", "k2", cost=None),
        row(T0 + DAY, "alice", "chat", "k2"),
        row(T0 - 1, "alice", "chat", "k2"),  # before the period
    ])  # fmt: skip
    lines = await store.usage_report(T0, T0 + 2 * DAY, "principal")  # type: ignore[attr-defined]
    summary = {(x.key, x.currency): (x.calls, x.prompt_tokens, x.cached_prompt_tokens, x.cost_total)
               for x in lines}  # fmt: skip
    assert summary == {("alice", "USD"): (3, 300, 120, 3000), ("bob", None): (1, 100, 40, 0)}
    by_thread = await store.usage_report(T0, T0 + 2 * DAY, "thread")  # type: ignore[attr-defined]
    assert sorted((x.key or "", x.currency or "", x.calls) for x in by_thread) == [
        ("", "", 1), ("", "USD", 1), ("t1", "USD", 2)]  # fmt: skip
    by_day = await store.usage_report(T0, T0 + 2 * DAY, "day")  # type: ignore[attr-defined]
    assert sorted((x.key, x.currency or "", x.calls) for x in by_day) == [
        (str(int(T0 // DAY)), "", 1),
        (str(int(T0 // DAY)), "USD", 2),
        (str(int(T0 // DAY) + 1), "USD", 1),
    ]
    with pytest.raises(ValidationError_, match="group usage by"):
        await store.usage_report(T0, T0 + DAY, "colour")  # type: ignore[attr-defined]


async def test_spent_sums_one_principal_and_leaves_out_one_daemon(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    await store.record_costs([row(T0, "alice", "chat", "k2", cost=7, instance="i1"),  # type: ignore[attr-defined]
                              row(T0, "alice", "chat", "k2", cost=5, instance="i2"),
                              row(T0, "bob", "chat", "k2", cost=100, instance="i2")])  # fmt: skip
    spent = store.spent  # type: ignore[attr-defined]
    assert await spent("alice", "USD", T0, T0 + 1) == 12
    assert await spent("alice", "USD", T0, T0 + 1, excluding_instance="i1") == 5
    assert await spent("alice", "EUR", T0, T0 + 1) == 0
