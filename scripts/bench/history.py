"""History assembly and append cost, on SQLite and on a real Postgres.

For threads of 10, 100, 1,000 and 10,000 turns (each turn a ~120-character
question and a ~480-character answer), the time of one ``assemble_messages``
call continuing the thread: loading it from the store plus building the message
array. Two windows: kimi-k2's 262,144 tokens (16,384 kept for the reply), where
1,000 turns still fit whole and 10,000 are trimmed in a block, down to the
low-water mark of :mod:`exai.store.window`; and an unbounded window, where every
turn is loaded and estimated, to show the growth of the full path.

Then the cost of one append (a question and its answer) as turn 10 and as turn
10,000 of a thread: 50 threads of 9 turns each get their 10th, and one thread of
9,950 turns gets turns 9,951 to 10,000.

Threads are seeded with ``import_thread`` (one transaction each); the appends
measured go through ``append``. Postgres is a throwaway local server
(:class:`~exai.emulators.postgres.TempPostgres`) with fsync off, so its figures
show the store's work, not a disk's.

Run: ``python -m scripts.bench.history`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exai.emulators.postgres import TempPostgres
from exai.store.base import ConversationStore, StoredMessage, StoreLimits, Thread
from exai.store.history import ContextLimits, assemble_messages
from exai.store.postgres import PostgresStore
from exai.store.sqlite import SqliteStore
from scripts.bench.common import prose

__all__ = ["main"]

SIZES = (10, 100, 1_000, 10_000)
KIMI_K2 = ContextLimits(context_window=262_144, max_output_tokens=16_384, family="kimi")
UNBOUNDED = ContextLimits(context_window=10**9, max_output_tokens=16_384, family="kimi")
LIMITS = StoreLimits(max_turns=20_000)
OWNER = "bench"


def _turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"question {n}: " + prose(rng, 110)},
            {"role": "assistant", "content": f"answer {n}: " + prose(rng, 470)}]  # fmt: skip


async def _seed(store: ConversationStore, turns: int, rng: random.Random) -> str:
    now = time.time()
    thread_id = str(uuid.uuid4())
    messages: list[StoredMessage] = []
    for n in range(1, turns + 1):
        for message in _turn(rng, n):
            messages.append(StoredMessage(thread_id=thread_id, seq=len(messages) + 1, turn=n,
                                          role=message["role"], content=message["content"],
                                          request_id=f"seed-{n}", created_at=now))  # fmt: skip
    thread = Thread(id=thread_id, owner=OWNER, title="bench", created_at=now, updated_at=now,
                    expires_at=now)  # fmt: skip
    await store.import_thread(thread, messages)
    return thread_id


async def _timed(call: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def _assembly(store: ConversationStore, rng: random.Random) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for turns in SIZES:
        thread_id = await _seed(store, turns, rng)
        for label, limits in (("kimi_k2", KIMI_K2), ("unbounded", UNBOUNDED)):
            result = None

            async def once(limits: ContextLimits = limits, thread_id: str = thread_id) -> None:
                nonlocal result
                result = await assemble_messages(
                    system_prompt="You are helpful.",
                    new_input="next question",
                    limits=limits,
                    store=store,
                    thread_id=thread_id,
                    owner=OWNER,
                )

            repeat = 5 if turns >= 10_000 and label == "unbounded" else 30
            await once()  # warm caches
            samples = await _timed(once, repeat)
            assert result is not None
            figures[f"{label}_{turns}"] = {
                "median_ms": statistics.median(samples),
                "turns_included": result.turns_included,
                "turns_dropped": result.turns_dropped,
            }
    return figures


async def _appends(store: ConversationStore, rng: random.Random) -> dict[str, float]:
    small = [await _seed(store, 9, rng) for _ in range(50)]
    big = await _seed(store, 9_950, rng)
    turn10, turn10k = [], []
    for index, thread_id in enumerate(small):
        start = time.perf_counter()
        await store.append(thread_id, OWNER, _turn(rng, 10), request_id=f"a{index}")
        turn10.append((time.perf_counter() - start) * 1000)
    for n in range(9_951, 10_001):
        start = time.perf_counter()
        await store.append(big, OWNER, _turn(rng, n), request_id=f"b{n}")
        turn10k.append((time.perf_counter() - start) * 1000)
    assert (await store.get_thread(big, OWNER)).turns == 10_000
    return {"turn_10_ms": statistics.median(turn10), "turn_10000_ms": statistics.median(turn10k)}


async def _backend(store: ConversationStore) -> dict[str, Any]:
    try:
        rng = random.Random(7)
        return {"assembly": await _assembly(store, rng), "append": await _appends(store, rng)}
    finally:
        await store.aclose()


def _table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| backend | window | " + " | ".join(f"{n:,} turns" for n in SIZES) + " |",
             "|---|---|" + "---|" * len(SIZES)]  # fmt: skip
    for backend, figures in results.items():
        for label in ("kimi_k2", "unbounded"):
            cells = []
            for turns in SIZES:
                f = figures["assembly"][f"{label}_{turns}"]
                cells.append(f"{f['median_ms']:.2f} ms ({f['turns_included']:,} kept)")
            lines.append(f"| {backend} | {label} | " + " | ".join(cells) + " |")
    lines += ["", "| backend | append turn 10 | append turn 10,000 | ratio |", "|---|---|---|---|"]
    for backend, figures in results.items():
        a = figures["append"]
        lines.append(f"| {backend} | {a['turn_10_ms']:.2f} ms | {a['turn_10000_ms']:.2f} ms | "
                     f"{a['turn_10000_ms'] / a['turn_10_ms']:.2f}x |")  # fmt: skip
    return "\n".join(lines)


async def _run() -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="exai-bench-") as tmp:
        store = await SqliteStore.open(Path(tmp) / "bench.sqlite3", LIMITS)
        results["sqlite"] = await _backend(store)
    with TempPostgres() as server:
        results["postgres"] = await _backend(await PostgresStore.open(server.url, LIMITS))
    return results


def main() -> dict[str, dict[str, Any]]:
    """Run the benchmark, print a markdown table and return the figures."""
    results = asyncio.run(_run())
    print("## History assembly (median per call) and append cost\n")
    print(_table(results))
    sqlite_1000 = results["sqlite"]["assembly"]["kimi_k2_1000"]["median_ms"]
    appends = results["sqlite"]["append"]
    print(f"\ntargets (SQLite): assembly at 1,000 turns {sqlite_1000:.2f} ms (<= 5 ms); "
          f"append turn 10,000 / turn 10 = "
          f"{appends['turn_10000_ms'] / appends['turn_10_ms']:.2f}x (<= 1.5x)")  # fmt: skip
    return results


if __name__ == "__main__":
    main()
