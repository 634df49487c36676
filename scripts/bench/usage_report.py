"""The cost report (``exai usage``) over 100,000 cost rows, on SQLite and a real Postgres.

The store is seeded with 100,000 rows (one per model call, as the ledger
writes them) spread evenly over 90 days: 50 principals, 12 tools, 8 models, two
currencies and one call in twenty to an unpriced model. The figure is the time
``exai usage`` takes to answer for one 30-day month grouped by principal, by
tool and by model: the store's grouped query plus building the report (what
the command does after opening the store). The baseline, in the same run on the
same table, is a plain ``SELECT COUNT(*)`` over it; a second reference reads the
same month without grouping (``SUM(cost_total)``), to show what the grouping
itself costs. p50 of 15 runs each, after one warm-up.

The second part is the console's Usage page at 1,000,000 calls (30 days), read
from the daily usage sums (:mod:`exai.store.usage`). The request log is filled by
one bulk ``INSERT ... SELECT`` per backend (as in ``request_log.py``, but with the
shape a team's traffic has: 200 keys, each its principal's (50) and used from
one face for nine calls in ten, with three of the eight models; 30% of calls
without a key, spread over every face and model; two currencies; one call in
twenty without a model call), then summed into ``usage_days`` by the schema's
own backfill statement (what ``record_calls`` adds batch by batch; the store's
tests check that the two agree). Each figure is the server-side time of the
code the page runs (:meth:`exai.daemon.usage_reads.UsageReads.usage`: the check,
five grouped queries, the reports made): the operator's 30 days split by model
and by face, 7 days, and one principal's own 30 days; then the spend of one key
in its month (``exai keys list`` asks it per key). The baseline, in the same run
on the same calls, is what the sums avoid: the same per-key month summed from
the request log itself (3 runs). And the write the sums add: ``record_calls``
for batches of 1,000 calls against inserting the same rows alone. p50 and p99 of
30 runs each, after one warm-up.

Postgres is a throwaway local server (:class:`~exai.emulators.postgres.TempPostgres`)
with fsync off, as in the history benchmark; skipped when none can be started.

Run: ``python -m scripts.bench.usage_report`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from exai.accounting.report import report
from exai.auth import Principal
from exai.daemon.operator_reads import OperatorReads
from exai.daemon.usage_reads import UsageReads
from exai.sqldb.executor import insert_all
from exai.store.call_log import CallLogRow
from exai.store.costs import CostRow
from exai.store.sql import SqlStore
from exai.store.usage import POSTGRES_TABLES as POSTGRES_USAGE
from exai.store.usage import SQLITE_TABLES as SQLITE_USAGE
from exai.store.usage import TABLES
from scripts.bench.common import on_both_stores, timed_ms

__all__ = ["main"]

ROWS = 100_000
DAYS = 90
RUNS = 15
GROUPS = ("principal", "tool", "model")
START = 1_780_000_000.0  # a fixed period, so every run queries the same rows
MODELS = [("kimi-k2.6", "kimi", "USD"), ("kimi-k3", "kimi", "USD"),
          ("kimi-k2-turbo", "kimi", "USD"), ("moonshot-v1-8k", "kimi", "CNY"),
          ("glm-5", "glm", "USD"), ("glm-4.7", "glm", "USD"), ("glm-4.6", "glm", "CNY"),
          ("glm-4.5-flash", "glm", "USD")]  # fmt: skip
TOOLS = ["chat", "consensus", "codereview", "debug", "analyze", "planner", "thinkdeep",
         "precommit", "refactor", "testgen", "secaudit", "completion"]  # fmt: skip


def _rows() -> list[CostRow]:
    rng = random.Random(15)
    rows = []
    for n in range(ROWS):
        model, provider, currency = rng.choice(MODELS)
        prompt = rng.randint(200, 60_000)
        cached = rng.randint(0, prompt)
        out = rng.randint(20, 4_000)
        priced = n % 20 != 0
        total = (prompt * 600 + out * 2500) // 1000 if priced else 0
        rows.append(CostRow(
            START + DAYS * 86400.0 * n / ROWS, f"daemon-{n % 3}", f"principal-{rng.randrange(50)}",
            rng.choice(TOOLS), f"s{n % 997}", f"r{n}", f"t{rng.randrange(5000)}", model, provider,
            prompt, cached, out, out // 4, currency if priced else None,
            total // 2, total // 4, total - total // 2 - total // 4, total,
        ))  # fmt: skip
    return rows


async def _p50(call: Callable[[], Awaitable[Any]]) -> float:
    await call()
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def _measure(store: SqlStore, rows: list[CostRow]) -> dict[str, Any]:
    for i in range(0, len(rows), 5000):
        await store.record_costs(rows[i : i + 5000])
    since, until = START + 30 * 86400.0, START + 60 * 86400.0
    count_sql = store.dialect.sql("SELECT COUNT(*) FROM {p}call_costs")
    counted = await store._read(lambda db: db.fetchrow(count_sql))
    assert counted is not None and int(counted[0]) == ROWS
    month_sql = store.dialect.sql(
        "SELECT SUM(cost_total) FROM {p}call_costs WHERE at >= ? AND at < ?"
    )
    figures: dict[str, Any] = {
        "baseline_count_ms": await _p50(lambda: store._read(lambda db: db.fetchrow(count_sql))),
        "month_sum_ms": await _p50(
            lambda: store._read(lambda db: db.fetchrow(month_sql, since, until))
        ),
    }
    for by in GROUPS:

        async def answer(by: str = by) -> dict[str, Any]:
            return report(await store.usage_report(since, until, by), by, since, until)

        data = await answer()
        calls = sum(t["calls"] for t in data["totals"])
        assert abs(calls - ROWS / 3) < 10, calls  # one month of the three
        figures[f"by_{by}_ms"] = await _p50(answer)
        figures[f"by_{by}_groups"] = len(data["groups"])
    return figures


async def _run() -> dict[str, dict[str, Any]]:
    rows = _rows()
    return await on_both_stores(lambda store, _backend: _measure(store, rows), "u.sqlite3")


# --- the Usage page at a million calls ------------------------------------------------

CALLS = 1_000_000
PAGE_RUNS = 30
OPERATOR = Principal("operator")
# Columns from the counter n: a multiplicative hash spreads each choice over the rows; a
# key (h % 200) is principal (key % 50)'s, used from face (key % 5) but for one call in
# ten, with models key % 8 .. key % 8 + 2.
_H = "((n * 2654435761) % 1000003)"
_KEYLESS = f"({_H} % 10 < 3)"
_FACE = ("CASE ({f}) % 5 WHEN 0 THEN 'ws' WHEN 1 THEN 'mcp' WHEN 2 THEN 'openai'"
         " WHEN 3 THEN 'anthropic' ELSE 'responses' END")  # fmt: skip
_MODEL = f"(CASE WHEN {_KEYLESS} THEN {_H} % 8 ELSE ({_H} % 200 + n % 3) % 8 END)"
_CALLS = f"""
INSERT INTO {{p}}call_log (at, instance_id, principal, key_id, face, client, tool,
    model_asked, model, provider, model_calls, session_id, request_id, thread_id,
    prompt_tokens, completion_tokens, currency, cost, latency_ms, status, error_code, trace_id)
SELECT {{start}} + n * {{step}}, 'daemon-' || (n % 3),
    'principal-' || (CASE WHEN {_KEYLESS} THEN {_H} % 50 ELSE ({_H} % 200) % 50 END),
    CASE WHEN {_KEYLESS} THEN NULL ELSE 'key-' || ({_H} % 200) END,
    {
    _FACE.format(
        f=f"CASE WHEN {_KEYLESS} THEN n WHEN n % 10 = 0 THEN {_H} % 200 + 1 ELSE {_H} % 200 END"
    )
},
    NULL, 'chat', NULL,
    CASE WHEN n % 20 = 0 THEN NULL ELSE 'model-' || {_MODEL} END,
    CASE WHEN n % 20 = 0 THEN NULL ELSE 'kimi' END,
    CASE WHEN n % 20 = 0 THEN 0 ELSE 1 END, 's' || (n % 9973), 'r' || n, NULL,
    200 + n % 60000, 20 + n % 4000,
    CASE WHEN n % 20 = 0 THEN NULL WHEN {_MODEL} = 3 THEN 'CNY' ELSE 'USD' END,
    CASE WHEN n % 20 = 0 THEN 0 ELSE n % 5000000 END, 50.0 + n % 30000,
    CASE WHEN n % 50 = 7 THEN 'error' ELSE 'ok' END,
    CASE WHEN n % 50 = 7 THEN 'TIMEOUT' ELSE NULL END, NULL
FROM {{series}}
"""
_SERIES = {
    "sqlite": "(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {rows})"
    " SELECT n FROM c)",
    "postgres": "generate_series(1, {rows}::bigint) AS g(n)",
}
PAGE_START = 1_780_012_800.0  # a UTC midnight: the 30 days are 30 whole days


class _Reads(OperatorReads, UsageReads):
    """The reads the console calls, over the store alone."""

    def __init__(self, store: SqlStore) -> None:
        settings = SimpleNamespace(admin_principals=[OPERATOR.name])
        self._core = SimpleNamespace(settings=settings, services=SimpleNamespace(store=store))


async def _fill_calls(store: SqlStore, backend: str, rows: int) -> float:
    started = time.perf_counter()
    sql = _CALLS
    for name, value in {"{series}": _SERIES[backend].replace("{rows}", str(rows)),
                        "{p}": store.dialect.prefix, "{start}": repr(PAGE_START),
                        "{step}": repr(30 * 86400.0 / (rows + 1))}.items():  # fmt: skip
        sql = sql.replace(name, value)
    script = POSTGRES_USAGE if backend == "postgres" else SQLITE_USAGE
    sums = [text.strip().replace("{s}.", store.dialect.prefix) for text in script.split(";")
            if text.strip().startswith("INSERT")]  # fmt: skip
    await store._write(lambda tx: tx.execute(sql))
    for statement in sums:  # the schema's own backfill: the whole table, then the narrow ones
        await store._write(lambda tx, statement=statement: tx.execute(statement))
    await store._write(lambda tx: tx.execute("ANALYZE"))
    return time.perf_counter() - started


async def _write_cost(store: SqlStore, runs: int) -> dict[str, dict[str, float]]:
    """``record_calls`` of 1,000 calls (rows and sums) against inserting the rows alone."""
    rows = [CallLogRow(PAGE_START + 40 * 86400.0 + n, "w", f"principal-{n % 50}",
                       f"key-{n % 200}", "openai", None, "chat", None, f"model-{n % 8}",
                       "kimi", 1, "s", f"w{n}", None, 500, 50, "USD", 1000, 10.0, "ok",
                       None, None) for n in range(1000)]  # fmt: skip
    columns = ", ".join(CallLogRow._fields[:-1])
    insert = f"INSERT INTO {{p}}call_log ({columns}) VALUES ({', '.join('?' * 22)})"
    return {
        "record_calls": await timed_ms(lambda: store.record_calls(rows), runs),
        "insert_only": await timed_ms(
            lambda: insert_all(store._write, store.dialect, insert, [r.values() for r in rows]),
            runs,
        ),
    }


async def measure_page(store: SqlStore, backend: str, rows: int = CALLS,
                       runs: int = PAGE_RUNS) -> dict[str, Any]:  # fmt: skip
    """Fill ``store`` with ``rows`` calls and time the Usage page's reads."""
    fill_s = await _fill_calls(store, backend, rows)
    sizes = {}
    for table in TABLES:
        count = await store._read(lambda db, table=table: db.fetchrow(store.dialect.sql(
            f"SELECT COUNT(*), SUM(calls) FROM {{p}}{table}")))  # fmt: skip
        assert count is not None and int(count[1]) == rows, (table, count)
        sizes[table] = int(count[0])
    reads = _Reads(store)
    now = PAGE_START + 30 * 86400.0 - 1
    until = datetime.fromtimestamp(now + 1, UTC).date().isoformat()

    def page(principal: Principal, **kw: Any) -> Callable[[], Awaitable[Any]]:
        async def run() -> Any:
            data = await reads.usage(principal, until=until, **kw)
            assert data["days"]["groups"], kw
            return data

        return run

    first, end = int(PAGE_START // 86400), int(PAGE_START // 86400) + 30
    month = store.dialect.sql("SELECT key_id, currency, SUM(cost) FROM {p}call_log"
                              " WHERE at >= ? AND at < ? AND key_id IS NOT NULL"
                              " GROUP BY key_id, currency")  # fmt: skip
    figures: dict[str, Any] = {"rows": rows, "fill_s": round(fill_s, 1), "sum_rows": sizes}
    figures["everyone_30d_model"] = await timed_ms(
        page(OPERATOR, days=30, split="model", everyone=True), runs)  # fmt: skip
    figures["everyone_30d_face"] = await timed_ms(
        page(OPERATOR, days=30, split="face", everyone=True), runs)  # fmt: skip
    figures["everyone_7d_model"] = await timed_ms(
        page(OPERATOR, days=7, split="model", everyone=True), runs)  # fmt: skip
    figures["own_30d"] = await timed_ms(page(Principal("principal-7"), days=30), runs)
    figures["key_month"] = await timed_ms(lambda: store.key_spent("key-7", "USD", first, end), runs)
    figures["log_keys_month"] = await timed_ms(
        lambda: store._read(lambda db: db.fetch(month, PAGE_START, PAGE_START + 30 * 86400.0)),
        3,
    )
    figures.update(await _write_cost(store, runs))
    return figures


async def _run_page() -> dict[str, dict[str, Any]]:
    return await on_both_stores(measure_page, "p.sqlite3")


_PAGE_SHOWN = (
    ("everyone_30d_model", "operator, 30 days, days split by model"),
    ("everyone_30d_face", "operator, 30 days, days split by face"),
    ("everyone_7d_model", "operator, 7 days"),
    ("own_30d", "one principal's own page, 30 days"),
    ("key_month", "one key's spend in its month (per key in `exai keys list`)"),
    ("log_keys_month", "baseline: every key's month summed from the request log"),
    ("record_calls", "write: record_calls, 1,000 calls (rows and sums)"),
    ("insert_only", "write baseline: the same 1,000 rows inserted alone"),
)


def print_page(results: dict[str, dict[str, Any]]) -> None:
    print(f"\n## The Usage page at {CALLS:,} calls (30 days), server-side, p50 / p99 of "
          f"{PAGE_RUNS} (baseline: 3)\n")  # fmt: skip
    print("| read | " + " | ".join(results) + " |\n|---|" + "---|" * len(results))
    for key, label in _PAGE_SHOWN:
        cells = [f"{r[key]['p50_ms']:.2f} / {r[key]['p99_ms']:.2f} ms" for r in results.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")
    fills = ", ".join(f"{b} {r['fill_s']} s" for b, r in results.items())
    sizes = next(iter(results.values()))["sum_rows"] if results else {}
    rows = ", ".join(f"{table} {n:,}" for table, n in sizes.items())
    print(f"\n(filling {CALLS:,} calls and summing them: {fills}; rows of sums: {rows})")


def main() -> dict[str, dict[str, Any]]:
    """Run both parts, print a markdown table each and return the figures."""
    results = asyncio.run(_run())
    print(
        f"## exai usage over {ROWS:,} cost rows: one month (~{ROWS // 3:,} calls), p50 of {RUNS}\n"
    )
    print("| backend | COUNT(*) baseline | month SUM, no grouping | by principal | by tool |"
          " by model |\n|---|---|---|---|---|---|")  # fmt: skip
    for backend, f in results.items():
        cells = [f"{f[f'by_{by}_ms']:.2f} ms" for by in GROUPS]
        print(f"| {backend} | {f['baseline_count_ms']:.2f} ms | {f['month_sum_ms']:.2f} ms | "
              + " | ".join(cells) + " |")  # fmt: skip
    page = asyncio.run(_run_page())
    print_page(page)
    return {**results, **{f"page_{backend}": figures for backend, figures in page.items()}}


if __name__ == "__main__":
    main()
