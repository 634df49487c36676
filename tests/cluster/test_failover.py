"""Two daemons behind HAProxy on one Postgres: one is killed while conversations are
mid-call, and every turn is still stored exactly once.

The short form of the reliability run (tests/reliability/test_cluster.py): four
clients of the project's own client drive eight conversations of three turns
through HAProxy (deploy/haproxy.cfg as shipped); daemon 1 gets SIGKILL while
calls wait at the provider. Each client reconnects through HAProxy, resumes its
session on the other daemon and re-sends its call with the same request_id.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from tests.cluster.harness import (
    check_turns,
    daemon_key,
    model_calls,
    run_conversations,
    running_cluster,
)
from tests.reliability.harness import wait_until

pytestmark = pytest.mark.timeout(120)


async def test_a_daemon_killed_mid_call_loses_no_turn_and_stores_none_twice(
    tmp_path: Path, emulator: EmulatorServer, postgres_server: TempPostgres
) -> None:
    url = postgres_server.create_database(f"cluster_{uuid.uuid4().hex[:8]}")
    emulator.configure(latency_ms=400)
    async with running_cluster(tmp_path, 2, url, emulator) as cluster:
        load = asyncio.ensure_future(run_conversations(cluster.url, clients=4, conversations=8,
                                                       turns=3))  # fmt: skip
        # Kill the first daemon once a call of its own waits at the provider (a call
        # of the other daemon's waiting there would make the kill land on nothing).
        first = f"Bearer {daemon_key(1)}"
        await wait_until(lambda: any(r["answered_at"] is None
                                     and r["headers"].get("authorization") == first
                                     for r in emulator.requests),
                         30.0, "a call of the first daemon waiting at the provider")  # fmt: skip
        await asyncio.sleep(0.1)
        await cluster.kill_and_restart(0, graceful=False, down_s=0.2)
        report = await load
    assert report.failures == []
    assert report.turns_ok == 8 * 3
    turns = await check_turns(url, report.threads, 3)
    stored_at = turns.pop("stored_at")
    assert turns == {"conversations": 8, "turns_lost": 0, "turns_duplicated": 0,
                     "threads_out_of_order": 0}  # fmt: skip
    calls = model_calls(emulator, cluster.kills, stored_at)
    assert calls["kills"][0]["in_flight"] >= 1  # the kill did land on calls in flight
    assert calls["repeated"] <= calls["in_flight_at_kills"]
    assert report.reconnects >= 1
