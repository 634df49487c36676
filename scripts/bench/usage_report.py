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

Postgres is a throwaway local server (:class:`~exai.emulators.postgres.TempPostgres`)
with fsync off, as in the history benchmark; skipped when none can be started.

Run: ``python -m scripts.bench.usage_report`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from exai.accounting.report import report
from exai.emulators.postgres import TempPostgres
from exai.store.costs import CostRow
from exai.store.postgres import PostgresStore
from exai.store.sql import SqlStore
from exai.store.sqlite import SqliteStore

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
    try:
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
    finally:
        await store.aclose()


async def _run() -> dict[str, dict[str, Any]]:
    rows = _rows()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="exai-bench-") as tmp:
        results["sqlite"] = await _measure(await SqliteStore.open(Path(tmp) / "u.sqlite3"), rows)
    try:
        server = TempPostgres().start()
    except RuntimeError as exc:
        print(f"(Postgres skipped: {exc})")
        return results
    try:
        results["postgres"] = await _measure(await PostgresStore.open(server.url), rows)
    finally:
        server.stop()
    return results


def main() -> dict[str, dict[str, Any]]:
    """Run the benchmark, print a markdown table and return the figures."""
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
    return results


if __name__ == "__main__":
    main()
