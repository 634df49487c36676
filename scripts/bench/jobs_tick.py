"""The scheduler tick's cost: 10,000 jobs, of which 100 are due, on SQLite and Postgres.

One tick's work in the store, as :meth:`exai.jobs.runner.JobRunner.tick` does
it: reset abandoned runs, fire the due jobs (a run inserted per fire,
``next_run_at`` moved on), claim the new runs under a lease, and look for
notifications to send. Running the claimed tools is not included: that is a
dispatcher call like any other.

Three cases per backend, in the same run on the same database, so the figure
of interest reads against two baselines:

* 10,000 jobs, 100 due (the case asked about);
* 10,000 jobs, none due (an idle tick: the cost of scanning nothing);
* 100 jobs, all 100 due (the same work with no other jobs: what 9,900 idle jobs add).

Jobs are seeded in bulk; after each timed tick the runs are deleted and the due
jobs made due again, outside the timing. p50 and p99 of 30 ticks after a warm-up.
Postgres is a throwaway local server (:class:`~exai.emulators.postgres.TempPostgres`,
fsync off); skipped when none can be started.

Run: ``python -m scripts.bench.jobs_tick`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from exai.emulators.postgres import TempPostgres
from exai.jobs.base import NewJob
from exai.jobs.policy import plan_fire
from exai.jobs.postgres import PostgresJobStore
from exai.jobs.schedule import parse_schedule
from exai.jobs.sql import INSERT_JOB, SqlJobStore, job_row
from exai.jobs.sqlite import SqliteJobStore

__all__ = ["CASES", "TICKS", "main", "run"]

TICKS = 30
NOW = 1_780_000_000.0
SCHEDULE = parse_schedule("cron", "*/5 * * * *", "Europe/Berlin")


def _job_row(n: int, due: bool) -> tuple[Any, ...]:
    next_run = NOW - 1.0 if due else NOW + 3600.0 + n
    new = NewJob(owner=f"p{n % 50}", name=f"job {n}", tool="chat",
                 arguments={"prompt": "morning report"}, schedule=SCHEDULE)  # fmt: skip
    return job_row("job_" + uuid.uuid4().hex[:20], new, next_run, NOW - 86400)


async def _seed(store: SqlJobStore, total: int, due: int) -> list[str]:
    # The store's own row builder, so the seed follows the jobs table as it grows.
    rows = [_job_row(n, n < due) for n in range(total)]
    sql = store.dialect.sql(INSERT_JOB)
    for start in range(0, len(rows), 2000):
        batch = rows[start : start + 2000]
        await store._write(lambda tx, b=batch: tx.executemany(sql, b))
    return [r[0] for r in rows[:due]]


async def _restore(store: SqlJobStore, due_ids: list[str]) -> None:
    delete = store.dialect.sql("DELETE FROM {p}job_runs")
    again = store.dialect.sql("UPDATE {p}jobs SET next_run_at = ? WHERE id = ?")

    async def body(tx: Any) -> None:
        await tx.execute(delete)
        await tx.executemany(again, [(NOW - 1.0, job_id) for job_id in due_ids])

    await store._write(body)


def _plan(job: Any, now: float) -> Any:
    return plan_fire(job.schedule, job.next_run_at, now, "run_once", 60.0)


async def _tick(store: SqlJobStore) -> tuple[float, int]:
    started = time.perf_counter()
    await store.reset_abandoned(NOW)
    await store.fire_due(NOW, 1000, _plan)
    claimed = await store.claim("bench", NOW, 60.0, 1000)
    await store.due_notifications("bench", NOW, 30.0, 20)
    return time.perf_counter() - started, len(claimed)


async def _case(store: SqlJobStore, total: int, due: int, ticks: int) -> dict[str, float]:
    due_ids = await _seed(store, total, due)
    samples = []
    for i in range(ticks + 1):
        elapsed, claimed = await _tick(store)
        assert claimed == due, (claimed, due)
        if i:
            samples.append(elapsed)
        await _restore(store, due_ids)
    samples.sort()
    return {"p50_ms": statistics.median(samples) * 1000,
            "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000}  # fmt: skip


CASES = [("10000 jobs, 100 due", 10_000, 100), ("10000 jobs, 0 due", 10_000, 0),
         ("100 jobs, 100 due", 100, 100)]  # fmt: skip


Case = tuple[str, int, int]  # label, jobs, of which due


async def _sqlite(directory: Path, cases: list[Case], ticks: int) -> dict[str, dict[str, float]]:
    out = {}
    for n, (label, total, due) in enumerate(cases):
        store = await SqliteJobStore.open(directory / f"jobs-{n}.sqlite3")
        try:
            out[label] = await _case(store, total, due, ticks)
        finally:
            await store.aclose()
    return out


async def _postgres(url: str, cases: list[Case], ticks: int) -> dict[str, dict[str, float]]:
    out = {}
    for n, (label, total, due) in enumerate(cases):
        store = await PostgresJobStore.open(url, schema=f"bench_jobs_{n}")
        try:
            out[label] = await _case(store, total, due, ticks)
        finally:
            await store.aclose()
    return out


Results = dict[str, dict[str, dict[str, float]]]  # backend -> case -> figures


async def run(
    cases: list[Case] = CASES, ticks: int = TICKS, postgres_url: str | None = None
) -> Results:
    """Each case on SQLite, then on Postgres (``postgres_url``, or a throwaway server)."""
    results: Results = {}
    with tempfile.TemporaryDirectory() as directory:
        results["sqlite"] = await _sqlite(Path(directory), cases, ticks)
    if postgres_url is not None:
        results["postgres"] = await _postgres(postgres_url, cases, ticks)
        return results
    try:
        server = TempPostgres().start()
    except Exception as exc:  # no server binaries here: report SQLite alone
        print(f"(Postgres skipped: {exc})")
        return results
    try:
        results["postgres"] = await _postgres(server.url, cases, ticks)
    finally:
        server.stop()
    return results


def main() -> dict[str, dict[str, dict[str, float]]]:
    """Run the benchmark, print a markdown table and return the figures."""
    results = asyncio.run(run())
    print(f"One scheduler tick in the store (reset, fire, claim, notifications), p50 (p99) of "
          f"{TICKS} ticks:\n")  # fmt: skip
    print("| backend | " + " | ".join(label for label, _, _ in CASES) + " |")
    print("|---|" + "---|" * len(CASES))
    for backend, cases in results.items():
        cells = [f"{cases[label]['p50_ms']:.2f} ms ({cases[label]['p99_ms']:.2f})"
                 for label, _, _ in CASES]  # fmt: skip
        print(f"| {backend} | " + " | ".join(cells) + " |")
    return results


if __name__ == "__main__":
    main()
