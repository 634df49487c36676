"""Fixtures for the conversation store: each contract test runs on both backends.

``store_factory`` opens a store on the backend of the current parameter; calling it
again opens another store on the same data (a restart, or a second daemon). The
Postgres server is the session's (``postgres_server`` of tests/conftest.py, which the
other packages' Postgres tests share); each test gets its own schema in it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from exai.store import postgres as _postgres
from exai.store import sqlite as _sqlite
from exai.store.base import ConversationStore, StoreLimits
from exai.store.postgres import PostgresStore
from exai.store.sqlite import SqliteStore

StoreFactory = Callable[..., Awaitable[ConversationStore]]

# The newest schema version; both backends number their migrations alike.
LATEST_SCHEMA = _sqlite.MIGRATIONS[-1][0]
assert _postgres.MIGRATIONS[-1][0] == LATEST_SCHEMA


class FakeClock:
    """A clock tests move by hand, to expire threads without waiting."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store_factory(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[StoreFactory]:
    opened: list[ConversationStore] = []
    schema = f"t_{uuid.uuid4().hex[:16]}"
    server = request.getfixturevalue("postgres_server") if backend == "postgres" else None

    async def open_one(limits: StoreLimits | None = None, **kw: Any) -> ConversationStore:
        limits = limits or StoreLimits()
        store: ConversationStore
        if server is not None:
            store = await PostgresStore.open(server.url, limits, schema=schema, clock=clock, **kw)
        else:
            store = await SqliteStore.open(tmp_path / "conversations.sqlite3", limits, clock=clock)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.aclose()


@pytest.fixture
async def store(store_factory: StoreFactory) -> ConversationStore:
    return await store_factory()
