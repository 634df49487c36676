"""The request log on both backends: rows written in a batch, paged newest first by a
keyset cursor, filtered by each column and by time, tailed by id, and pruned."""

from __future__ import annotations

from typing import Any

import pytest

from exai.errors import ValidationError_
from exai.store.call_log import CALL_LOG_FILTERS, CallFilter, CallLogRow, Cursor
from exai.web.console.request_log import csv_cell

T0 = 1_800_000_000.0


def row(n: int, **kw: Any) -> CallLogRow:
    base = CallLogRow(
        at=T0 + n, instance_id="i1", principal=f"p{n % 3}", key_id=f"k{n % 2}" if n % 5 else None,
        face=("ws", "mcp", "openai", "anthropic", "responses")[n % 5],
        client="Claude Code 2.1" if n % 4 == 0 else None, tool="chat" if n % 2 else "completion",
        model_asked="auto" if n % 3 == 0 else None, model=f"m{n % 4}", provider="kimi",
        model_calls=1, session_id=f"s{n % 7}", request_id=f"r{n}",
        thread_id=f"t{n % 6}" if n % 2 else None,
        prompt_tokens=100 + n, completion_tokens=10 + n, currency="USD", cost=1000 * n,
        latency_ms=float(n), status="error" if n % 10 == 9 else "ok",
        error_code="TIMEOUT" if n % 10 == 9 else None, trace_id=f"{n:032x}",
    )  # fmt: skip
    return base._replace(**kw)


async def test_pages_follow_the_keyset_newest_first_without_gaps_or_repeats(store) -> None:
    rows = [row(n) for n in range(120)]
    # Two calls that ended at the same moment are ordered by id, and both are shown.
    rows += [row(200, at=T0 + 50), row(201, at=T0 + 50)]
    await store.record_calls(rows)
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.call_log_page(CallFilter(), before=cursor, limit=25)
        seen += [r.request_id for r in page]
        if len(page) < 25:
            break
        cursor = Cursor(page[-1].at, int(page[-1].id))
    assert len(seen) == len(set(seen)) == 122
    ats = [(r.at, r.id) for r in await store.call_log_page(CallFilter(), limit=1000)]
    assert ats == sorted(ats, reverse=True)
    assert Cursor.parse(str(Cursor(T0 + 0.25, 7))) == Cursor(T0 + 0.25, 7)
    assert Cursor.parse("garbage") is None


async def test_each_column_filters_exactly(store) -> None:
    rows = [row(n) for n in range(40)]
    await store.record_calls(rows)
    for name in CALL_LOG_FILTERS:
        value = next(getattr(r, name) for r in rows if getattr(r, name))
        found = await store.call_log_page(CallFilter.of({name: value}), limit=1000)
        expected = {r.request_id for r in rows if getattr(r, name) == value}
        assert {r.request_id for r in found} == expected and expected, name


async def test_a_time_range_and_several_filters_combine(store) -> None:
    await store.record_calls([row(n) for n in range(100)])
    where = CallFilter.of({"since": T0 + 20, "until": str(T0 + 60), "status": "error"})
    found = await store.call_log_page(where, limit=1000)
    assert [r.request_id for r in found] == ["r59", "r49", "r39", "r29"]
    assert all(r.error_code == "TIMEOUT" for r in found)
    with pytest.raises(ValidationError_):
        CallFilter.of({"status": "maybe"})
    with pytest.raises(ValidationError_, match="principal is longer than 256"):
        CallFilter.of({"principal": "p" * 257})
    assert CallFilter.of({"principal": " p1 ", "since": None}).query() == {"principal": "p1"}


async def test_a_tail_returns_only_rows_written_after_the_top(store) -> None:
    assert await store.call_log_top() == 0
    await store.record_calls([row(n) for n in range(10)])
    top = await store.call_log_top()
    assert await store.call_log_page(CallFilter(), after_id=top) == []
    await store.record_calls([row(50), row(51, principal="zed")])
    tail = await store.call_log_page(CallFilter(), after_id=top)
    assert [r.request_id for r in tail] == ["r51", "r50"]
    only = await store.call_log_page(CallFilter(principal="zed"), after_id=top)
    assert [r.request_id for r in only] == ["r51"]
    got = await store.call_log_row(int(tail[0].id))
    assert got == tail[0] and got.as_dict()["trace_id"] == f"{51:032x}"


async def test_prune_removes_calls_past_the_retention(store) -> None:
    await store.record_calls([row(n) for n in range(30)])
    assert await store.prune_call_log(T0 + 10) == 10
    left = await store.call_log_page(CallFilter(), limit=1000)
    assert min(r.at for r in left) == T0 + 10 and len(left) == 20


def test_csv_cells_that_look_like_formulas_are_made_inert() -> None:
    assert [csv_cell(v) for v in ("=1+1", "+cmd", "-2", "@SUM(A1)", "\tx", "ok", None, 3)] == [
        "'=1+1", "'+cmd", "'-2", "'@SUM(A1)", "'\tx", "ok", "", 3,
    ]  # fmt: skip


async def test_the_request_log_benchmark_runs_its_pages_on_both_backends(store, backend) -> None:
    """scripts/bench/request_log.py end to end on a small table (its figures not judged)."""
    from scripts.bench.request_log import measure

    figures = await measure(store, backend, rows=5000, runs=2)
    assert figures["rows"] == 5000
    assert all(figures[k]["p50_ms"] > 0 for k in ("first_page", "page_1000", "tail_poll"))


async def test_the_ledger_writes_queued_rows_and_keeps_the_log_within_its_retention(store) -> None:
    from exai.accounting.ledger import Ledger

    now = T0 + 10 * 86400.0
    ledger = Ledger(store, instance_id="i1", clock=lambda: now, call_log_days=7)
    await store.record_calls([row(0, at=now - 8 * 86400.0), row(1, at=now - 6 * 86400.0)])
    ledger.log_call(row(2, at=now))
    await ledger.flush()  # writes the queued row, and prunes: the first flush is due
    kept = await store.call_log_page(CallFilter(), limit=10)
    assert [r.request_id for r in kept] == ["r2", "r1"]
    forever = Ledger(store, instance_id="i1", clock=lambda: now + 365 * 86400.0, call_log_days=0)
    await forever.flush()
    assert len(await store.call_log_page(CallFilter(), limit=10)) == 2
