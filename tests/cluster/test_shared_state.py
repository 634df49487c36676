"""Two daemons on one Postgres share sessions, finished results, rate counts and the
workflow step lock; with SQLite nothing is shared.

Both daemons run in this process on ephemeral ports, each with its own pool to
one real Postgres database; model calls go to the provider emulator.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from exai.client import HelloRefused
from exai.cluster.shared import ClusterState
from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from exai.errors import CancelledError
from exai.protocol import ErrorCode
from exai.store.postgres import PostgresStore
from tests.conftest import emulated_providers, make_settings, running_daemon

MODEL = "kimi-k2.6"
TOKENS = "alice=alice-token-1,bob=bob-token-2"


def _settings(tmp_path: Path, name: str, url: str | None, emulator: EmulatorServer,
              **extra: Any) -> Any:  # fmt: skip
    values: dict[str, Any] = {**emulated_providers(emulator), "ws_tokens": TOKENS,
                              "cluster_sync_s": 3600.0, "memory_enabled": False}  # fmt: skip
    if url is not None:
        values["store_url"] = url
    return make_settings(tmp_path / name, **{**values, **extra})


@pytest.fixture
def store_url(postgres_server: TempPostgres) -> str:
    return postgres_server.create_database(f"shared_{uuid.uuid4().hex[:8]}")


async def test_a_session_resumes_on_another_daemon_and_replays_without_a_model_call(
    tmp_path: Path, emulator: EmulatorServer, store_url: str, client_factory: Any
) -> None:
    async with (
        running_daemon(_settings(tmp_path, "a", store_url, emulator)) as a,
        running_daemon(_settings(tmp_path, "b", store_url, emulator)) as b,
    ):
        first = await client_factory(a, "alice-token-1")
        arguments = {"prompt": "remember the number 7", "model": MODEL}
        answered = await first.call("chat", arguments, request_id="r-1")
        assert answered.error is None, answered.error
        assert a.core.cluster is not None
        await a.core.cluster.sync()  # what the background writer does every cluster_sync_s
        calls = len(emulator.requests)

        moved = await client_factory(b, "alice-token-1", session_id=first.session_id)
        again = await moved.call("chat", arguments, request_id="r-1")
        assert again.error is None and again.metadata.replayed
        assert again.outputs == answered.outputs
        assert len(emulator.requests) == calls
        assert b.core.cluster is not None and b.core.cluster.stats["resumed"] == 1

        with pytest.raises(HelloRefused) as refused:
            await client_factory(b, "bob-token-2", session_id=first.session_id)
        assert "another principal" in str(refused.value)


async def test_a_retryable_error_is_not_shared_so_the_retry_runs_elsewhere(
    store_url: str,
) -> None:
    store = await PostgresStore.open(store_url)
    state = ClusterState(store.pool, store.schema, sync_s=3600.0, replay_window_s=600.0,
                         session_ttl_s=3600.0)  # fmt: skip
    try:
        ok = b'{"op":"call_tool_res","request_id":"1","outputs":[],"error":null}'
        # A success whose text merely mentions the flag is still a success.
        quoting = (b'{"op":"call_tool_res","request_id":"2","outputs":[{"type":"text",'
                   b'"text":"\\"retryable\\":true"}],"error":null}')  # fmt: skip
        cancelled = (b'{"op":"call_tool_res","request_id":"3","outputs":[],"error":{"code":'
                     b'"CANCELLED","message":"shutting down","retryable":true}}')  # fmt: skip
        state.note_result("S1", "alice", "1", "f", ok, None)
        state.note_result("S1", "alice", "2", "f", quoting, None)
        state.note_result("S1", "alice", "3", "f", cancelled,
                          CancelledError("shutting down", retryable=True))  # fmt: skip
        await state.sync()
        shared = await state.load_session("S1")
        assert shared is not None and shared.owner == "alice"
        assert [(r.request_id, r.result) for r in shared.results] == [("1", ok), ("2", quoting)]
    finally:
        await state.aclose()
        await store.aclose()


async def test_the_rate_limit_holds_across_daemons(
    tmp_path: Path, emulator: EmulatorServer, store_url: str, client_factory: Any
) -> None:
    limits = {"rate_limit_per_min": 0.5, "cluster_rate_window_s": 3600.0,
              "rate_limit_burst": 1000}  # 30 calls per window  # fmt: skip
    async with (
        running_daemon(_settings(tmp_path, "a", store_url, emulator, **limits)) as a,
        running_daemon(_settings(tmp_path, "b", store_url, emulator, **limits)) as b,
    ):
        assert a.core.cluster is not None and b.core.cluster is not None
        a.core.cluster.clock = b.core.cluster.clock = lambda: 7200.0 + 5  # inside one window
        clients = [
            await client_factory(a, "alice-token-1"),
            await client_factory(b, "alice-token-1"),
        ]
        admitted = 0
        for _ in range(10):  # each round: both daemons called, then both synchronize
            for client in clients:
                for _ in range(4):
                    result = await client.call("echo", {"text": "x"})
                    assert result.error is None or result.error.code == ErrorCode.RATE_LIMITED
                    admitted += result.error is None
            await a.core.cluster.sync()
            await b.core.cluster.sync()
        # The limit, and at most one call on credit per daemon beyond it.
        assert 30 <= admitted <= 32


async def test_the_workflow_step_lock_excludes_another_daemon(store_url: str) -> None:
    one = await PostgresStore.open(store_url)
    two = await PostgresStore.open(store_url)
    try:
        async with one.advisory_lock("workflow:t-1"):
            waiting = asyncio.ensure_future(_hold(two, "workflow:t-1"))
            other = asyncio.ensure_future(_hold(two, "workflow:t-2"))
            await asyncio.wait_for(other, 10)  # another thread's lock is free
            await asyncio.sleep(0.3)
            assert not waiting.done()
        await asyncio.wait_for(waiting, 10)
    finally:
        await one.aclose()
        await two.aclose()


async def _hold(store: PostgresStore, name: str) -> None:
    async with store.advisory_lock(name):
        pass


async def test_with_sqlite_nothing_is_shared(
    tmp_path: Path, emulator: EmulatorServer, client_factory: Any
) -> None:
    async with running_daemon(_settings(tmp_path, "a", None, emulator)) as a:
        assert a.core.cluster is None and a.core.sessions.shared is None
        client = await client_factory(a, "alice-token-1")
        assert (await client.call("echo", {"text": "x"})).error is None
