"""The SQLite conversation store's own cost per operation, this tree against another.

What a chat turn asks of the store, on one SQLite file: an append of a turn (a
500-character prompt, an 800-character answer) and the history load the next
turn makes, one after the other over 40 threads (600 of each), then appends 40 at
once (400). Reported per operation: the wall time of the sequential pair and of a
concurrent append, and the process's CPU. The point is the hop between the event
loop and the store's threads (``exai.sqldb.thread``): the statements are the same
on every tree.

With ``EXAI_BENCH_BASE_SRC`` naming another tree's ``src/`` (for example one taken
with ``git archive <commit> src``), each round runs that tree's store too, in a
fresh process beside this tree's, in alternating order: the "before" of a change.
Three rounds; the table gives each round's figures.

Run: ``python -m scripts.bench.store_ops`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "measure"]

_THREADS, _SEQUENTIAL_TURNS, _CONCURRENT_TURNS = 40, 15, 10


async def measure(threads: int = _THREADS, sequential: int = _SEQUENTIAL_TURNS,
                  concurrent: int = _CONCURRENT_TURNS) -> dict[str, float]:  # fmt: skip
    """One run in this process, on a fresh store: µs per operation."""
    from exai.store.base import StoreLimits
    from exai.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory(prefix="exai-bench-") as tmp:
        store = await SqliteStore.open(Path(tmp) / "c.sqlite3", StoreLimits())
        try:
            ids = [(await store.create_thread("alice", title=f"t{i}")).id for i in range(threads)]
            turn = [{"role": "user", "content": "q" * 500},
                    {"role": "assistant", "content": "a" * 800}]  # fmt: skip
            start, cpu = time.perf_counter(), time.process_time()
            for n in range(sequential):
                for tid in ids:
                    await store.append(tid, "alice", turn, request_id=f"s{n}-{tid}")
                    await store.load_context(tid, "alice", family="kimi")
            pairs = time.perf_counter() - start
            middle = time.perf_counter()
            for n in range(concurrent):
                key = f"c{n}-"
                await asyncio.gather(*(store.append(tid, "alice", turn[:1], request_id=key + tid)
                                       for tid in ids))  # fmt: skip
            appends = time.perf_counter() - middle
            used = time.process_time() - cpu
        finally:
            await store.aclose()
    ops = threads * (sequential * 2 + concurrent)
    return {"pair_us": pairs / (threads * sequential) * 1e6,
            "concurrent_append_us": appends / (threads * concurrent) * 1e6,
            "cpu_per_op_us": used / ops * 1e6}  # fmt: skip


def _in_process(src: str | None) -> dict[str, float]:
    """:func:`measure` in a fresh interpreter, importing ``exai`` from ``src`` if given."""
    env = dict(os.environ)
    if src is not None:
        link = Path(tempfile.mkdtemp(prefix="exai-base-")) / "exai"
        link.symlink_to(Path(src).resolve())
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(link.parent), os.getcwd()]))
    code = ("import asyncio, json; from scripts.bench.store_ops import measure; "
            "print(json.dumps(asyncio.run(measure())))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=os.getcwd())  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    base = os.environ.get("EXAI_BENCH_BASE_SRC") or None
    rounds: list[dict[str, Any]] = []
    for n in range(3):
        order = ["this", "base"] if n % 2 == 0 else ["base", "this"]
        figures = {tree: _in_process(base if tree == "base" else None)
                   for tree in order if tree == "this" or base is not None}  # fmt: skip
        rounds.append(figures)
    print("## The SQLite store per operation\n")
    print("| round | tree | append + history load | concurrent append | CPU per operation |")
    print("|---|---|---|---|---|")
    for n, figures in enumerate(rounds, start=1):
        for tree, f in sorted(figures.items()):
            print(f"| {n} | {tree} | {f['pair_us']:.0f} µs | {f['concurrent_append_us']:.0f} µs "
                  f"| {f['cpu_per_op_us']:.0f} µs |")  # fmt: skip
    return {"rounds": rounds}


if __name__ == "__main__":
    main(sys.argv[1:])
