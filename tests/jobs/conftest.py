"""Fixtures for jobs: each store test runs on SQLite and on a real Postgres 15
(a schema of its own per test), and the notification receivers.

:class:`Receiver` is a test fixture: a loopback HTTP server standing in for an
ntfy server or a webhook endpoint. It records every request (path, headers, raw
body) and answers with the statuses it is told to, so tests can check what was
delivered, its signature, and what happens when delivery fails.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from exai.jobs.base import JobStore
from exai.jobs.postgres import PostgresJobStore
from exai.jobs.sqlite import SqliteJobStore

JobStoreFactory = Callable[[], Awaitable[JobStore]]


@pytest.fixture(params=["sqlite", "postgres"])
def jobs_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def jobs_store_factory(
    jobs_backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[JobStoreFactory]:
    opened: list[JobStore] = []
    schema = f"j_{uuid.uuid4().hex[:16]}"

    async def open_one() -> JobStore:
        store: JobStore
        if jobs_backend == "postgres":
            server = request.getfixturevalue("postgres_server")
            store = await PostgresJobStore.open(server.url, schema=schema)
        else:
            store = await SqliteJobStore.open(tmp_path / "jobs.sqlite3")
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.aclose()


@pytest.fixture
async def jobs_store(jobs_store_factory: JobStoreFactory) -> JobStore:
    return await jobs_store_factory()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Loopback HTTP receiver (test fixture); ``statuses`` are answered in turn, then 200."""

    statuses: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    port: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append(Received(scope["path"], headers, body))
        self.arrived.set()
        status = self.statuses.pop(0) if self.statuses else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    app = Receiver()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    app.port = server.servers[0].sockets[0].getsockname()[1]
    yield app
    server.should_exit = True
    await task
