"""The daily usage sums on both backends: added with the request log's rows, grouped and
split by day, principal, key, face and model, one principal's alone, a key's spend, and
the rows a store kept before the sums existed counted when it migrates."""

from __future__ import annotations

from typing import Any

import pytest

from exai.errors import ValidationError_
from exai.store import postgres as _postgres
from exai.store import sqlite as _sqlite
from exai.store.call_log import CallLogRow
from exai.store.usage import TABLES, UsageSum, table_for, usage_deltas

DAY = 86400
D0 = 20_800  # a UTC day, as days since the epoch
T0 = D0 * DAY + 3600.0


def call(n: int, **kw: Any) -> CallLogRow:
    base = CallLogRow(
        at=T0 + (n % 3) * DAY + n, instance_id="i1", principal=f"p{n % 2}",
        key_id=f"k{n % 4}" if n % 5 else None, face=("ws", "openai", "mcp")[n % 3], client=None,
        tool="chat", model_asked=None, model=f"m{n % 2}" if n % 7 else None, provider="kimi",
        model_calls=1 if n % 7 else 0, session_id="s", request_id=f"r{n}", thread_id=None,
        prompt_tokens=100, completion_tokens=10, currency="USD" if n % 7 else None,
        cost=1000 * n if n % 7 else 0, latency_ms=1.0, status="error" if n % 10 == 9 else "ok",
        error_code="TIMEOUT" if n % 10 == 9 else None, trace_id=None,
    )  # fmt: skip
    return base._replace(**kw)


def expected(rows: list[CallLogRow], by: str, split: str | None = None) -> dict[Any, list[int]]:
    """The sums computed here from the rows themselves."""

    def value(r: CallLogRow, name: str) -> str | None:
        if name == "day":
            return str(int(r.at // DAY))
        got = {"key": r.key_id, "principal": r.principal, "face": r.face, "model": r.model}[name]
        return got or None

    out: dict[Any, list[int]] = {}
    for r in rows:
        k = (value(r, by), None if split is None else value(r, split), r.currency)
        held = out.setdefault(k, [0, 0, 0, 0, 0, 0])
        for i, v in enumerate((1, r.status != "ok", r.model_calls, r.prompt_tokens,
                               r.completion_tokens, r.cost)):  # fmt: skip
            held[i] += v
    return out


def as_dict(sums: list[UsageSum]) -> dict[Any, list[int]]:
    fields = ("calls", "errors", "model_calls", "prompt_tokens", "completion_tokens", "cost")
    return {(s.key, s.split, s.currency): [getattr(s, f) for f in fields] for s in sums}


def test_a_batch_adds_one_delta_per_row_it_touches_in_key_order() -> None:
    rows = [call(1), call(1, request_id="again"), call(2), call(4)]
    deltas = usage_deltas(rows)
    whole = deltas["usage_days"]
    assert len(whole) == 3 and whole == sorted(whole)
    (first,) = [d for d in whole if d[1] == "p1"]
    assert first[:6] == (D0 + 1, "p1", "k1", "openai", "m1", "USD")
    assert first[6:] == (2, 0, 2, 200, 20, 2000)
    # The narrow tables hold the same sums with fewer columns apart.
    for table, columns in TABLES.items():
        assert deltas[table] == sorted(deltas[table])
        assert sum(d[len(columns)] for d in deltas[table]) == 4, table
        assert sum(d[-1] for d in deltas[table]) == 1000 + 1000 + 2000 + 4000, table
    assert [d[:4] for d in deltas["usage_days_models"]] == [
        (D0 + 1, "openai", "m0", "USD"), (D0 + 1, "openai", "m1", "USD"),
        (D0 + 2, "mcp", "m0", "USD"),
    ]  # fmt: skip


def test_the_narrowest_table_that_keeps_the_columns_apart_is_read() -> None:
    assert table_for({"day", "model"}) == table_for({"day", "face"}) == "usage_days_models"
    assert table_for({"day", "key_id"}) == table_for({"day", "principal"}) == "usage_days_keys"
    assert table_for({"day", "key_id", "model"}) == "usage_days"
    assert table_for({"day", "principal", "face"}) == "usage_days"


@pytest.mark.parametrize(("by", "split"), [
    ("day", None), ("key", None), ("principal", None), ("face", None), ("model", None),
    ("day", "model"), ("day", "face"), ("key", "model"), ("principal", "key"),
])  # fmt: skip
async def test_sums_match_the_rows_they_count(store, by: str, split: str | None) -> None:
    rows = [call(n) for n in range(60)]
    # Written in three batches, as the ledger's writer does: the sums add up.
    for i in range(0, 60, 20):
        await store.record_calls(rows[i : i + 20])
    sums = await store.usage_sums(D0, D0 + 3, by, split)
    assert as_dict(sums) == expected(rows, by, split)
    assert sums == sorted(sums, key=lambda s: (s.key or "", s.split or "", s.currency or ""))


async def test_the_period_and_one_principal_bound_the_sums(store) -> None:
    rows = [call(n) for n in range(60)]
    await store.record_calls(rows)
    day1 = await store.usage_sums(D0 + 1, D0 + 2, "key")
    assert as_dict(day1) == expected([r for r in rows if int(r.at // DAY) == D0 + 1], "key")
    mine = await store.usage_sums(D0, D0 + 3, "model", "day", principal="p1")
    assert as_dict(mine) == expected([r for r in rows if r.principal == "p1"], "model", "day")
    assert await store.usage_sums(D0 + 3, D0 + 9, "day") == []


async def test_a_keys_spend_is_its_own_calls_in_its_currency(store) -> None:
    rows = [call(n) for n in range(60)]
    rows.append(call(61, key_id="k1", currency="CNY", cost=5))
    await store.record_calls(rows)
    want = sum(r.cost for r in rows if r.key_id == "k1" and r.currency == "USD")
    assert want and await store.key_spent("k1", "USD", D0, D0 + 3) == want
    assert await store.key_spent("k1", "CNY", D0, D0 + 3) == 5
    first_day = sum(r.cost for r in rows if r.key_id == "k1" and r.currency == "USD"
                    and int(r.at // DAY) == D0)  # fmt: skip
    assert await store.key_spent("k1", "USD", D0, D0 + 1) == first_day
    assert await store.key_spent("nobody", "USD", D0, D0 + 3) == 0


async def test_a_name_that_is_not_a_group_is_refused(store) -> None:
    with pytest.raises(ValidationError_, match="cannot group usage by 'tool'"):
        await store.usage_sums(D0, D0 + 1, "tool")
    with pytest.raises(ValidationError_, match="cannot split usage by 'x; DROP'"):
        await store.usage_sums(D0, D0 + 1, "day", "x; DROP")
    with pytest.raises(ValidationError_, match="already grouped by day"):
        await store.usage_sums(D0, D0 + 1, "day", "day")


async def test_rows_kept_before_the_sums_existed_are_counted_on_migration(
    store_factory, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _sqlite if backend == "sqlite" else _postgres
    monkeypatch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:-1])
    old = await store_factory()
    rows = [call(n) for n in range(30)]
    columns = ", ".join(CallLogRow._fields[:-1])
    sql = old.dialect.sql(f"INSERT INTO {{p}}call_log ({columns}) VALUES ({', '.join('?' * 22)})")
    await old._write(lambda tx: tx.executemany(sql, [r.values() for r in rows]))
    await old.aclose()
    monkeypatch.undo()
    new = await store_factory()
    # Each table: the whole breakdown and the two narrow ones.
    for by, split in (("key", "face"), ("day", "model"), ("principal", "key")):
        found = as_dict(await new.usage_sums(D0, D0 + 3, by, split))
        assert found == expected(rows, by, split), (by, split)
    # And rows written after it add to them.
    await new.record_calls([call(3)])
    sums = as_dict(await new.usage_sums(D0, D0 + 3, "key", "face"))
    assert sums == expected([*rows, call(3)], "key", "face")
