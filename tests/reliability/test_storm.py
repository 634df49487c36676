"""Disconnect storm: a thousand clients connect, call and vanish mid-call.

Each client opens a WebSocket, says ``hello``, starts a call (``echo`` sleeping
for a while, or ``chat`` against a slow provider) and, once the daemon has
acknowledged it, drops the TCP connection with a reset: no close frame, no
goodbye. A few vanish earlier: before the ack, or right after ``hello``.
Afterwards the daemon must be back where it started: no connections, nothing in
flight or queued, no extra asyncio tasks, sessions swept once the replay window
has passed, every capacity slot free (the full capacity is used again without a
single ``OVER_CAPACITY``), file descriptors and memory back near their start.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from exai.client import ExaiClient
from exai.emulators.provider import EmulatorServer
from tests.reliability.harness import DaemonProcess, provider_env, scaled, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

TOKEN = "storm-token-c0ffee"
MODEL = "kimi-k2.6"
CALL_S = 10.0  # how long a vanished client's call keeps running in the daemon
CAPACITY = 1000  # EXAI_MAX_INFLIGHT, with no queue: one leaked slot means OVER_CAPACITY
# Memory bounds, in MiB. Freed memory stays with the allocator for reuse, so RSS
# keeps the first storm's high-water mark; a second storm must reuse it rather
# than add to it (a leak of 8 KiB per client would show), and the total stays
# within a generous margin of the start.
SECOND_STORM_MIB = 8.0
RSS_MARGIN_MIB = 48.0
MODES = ["echo"] * 6 + ["echo_deadline", "chat", "before_ack", "after_hello"]


def _abort(ws: ClientConnection) -> None:
    """Vanish: reset the TCP connection (SO_LINGER 0) without a close frame."""
    sock = ws.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    ws.transport.abort()


async def _status(url: str) -> dict[str, Any]:
    async with ExaiClient(url, TOKEN, ping_interval=None) as client:
        res = await client.call("status", wait_s=30)
    assert res.error is None, res.error
    return dict(json.loads(res.outputs[0].text))


class Storm:
    def __init__(self, url: str, clients: int) -> None:
        self.url = url
        self.clients = clients
        self.modes = [MODES[i % len(MODES)] for i in range(clients)]
        self.waiting_for = sum(m not in ("before_ack", "after_hello") for m in self.modes)
        self.acked = 0
        self.everyone_called = asyncio.Event()
        self.connecting = asyncio.Semaphore(200)
        self.tally: Counter[str] = Counter()

    async def client(self, i: int) -> None:
        mode = self.modes[i]
        async with self.connecting:
            ws = await connect(self.url, ping_interval=None, open_timeout=60, max_size=None)
            await ws.send(json.dumps({"op": "hello", "token": TOKEN}))
            assert json.loads(await ws.recv())["ok"]
        if mode == "after_hello":
            _abort(ws)
            self.tally[mode] += 1
            return
        if mode == "chat":
            call = {
                "name": "chat",
                "arguments": {
                    "prompt": f"storm {i} [emulate:latency_ms={int(CALL_S * 1000)}]",
                    "model": MODEL,
                },
            }
        else:
            call = {"name": "echo", "arguments": {"text": str(i), "delay_s": CALL_S}}
            if mode == "echo_deadline":
                call["timeout_s"] = CALL_S / 2
        await ws.send(json.dumps({"op": "call_tool", "request_id": f"storm-{i}", **call}))
        if mode == "before_ack":
            _abort(ws)
            self.tally[mode] += 1
            return
        async with asyncio.timeout(60):
            while (frame := json.loads(await ws.recv()))["op"] != "call_tool_ack":
                assert frame["op"] == "progress", frame
        self.acked += 1
        if self.acked == self.waiting_for:
            self.everyone_called.set()
        await self.everyone_called.wait()
        _abort(ws)
        self.tally[mode] += 1


async def test_a_thousand_clients_vanishing_mid_call_leave_nothing_behind(
    tmp_path: Path, emulator: EmulatorServer, figures
) -> None:
    n = scaled(1000, minimum=50)
    daemon = DaemonProcess(
        tmp_path,
        EXAI_WS_TOKEN=TOKEN,
        EXAI_MAX_INFLIGHT=str(CAPACITY),
        EXAI_QUEUE_MAX="0",
        EXAI_RATE_LIMIT_PER_MIN="0",
        EXAI_REPLAY_WINDOW_S="1",
        EXAI_KIMI_MAX_INFLIGHT="1000",
        EXAI_AUDIT_ENABLED="true",
        EXAI_AUDIT_SINK="jsonl",
        EXAI_AUDIT_JSONL_PATH=str(tmp_path / "audit.jsonl"),
        **provider_env(emulator),
    ).start()
    try:
        # Warm up every path the storm takes, so "start" is a daemon that has served.
        async with ExaiClient(daemon.url, TOKEN, ping_interval=None) as warm:
            await asyncio.gather(
                *(warm.call("echo", {"text": "w", "delay_s": 0.05}) for _ in range(50))
            )
            await warm.call("chat", {"prompt": "warm", "model": MODEL})
        before = await _status(daemon.url)
        rss_start, fds_start = daemon.rss_bytes(), daemon.open_fds()
        provider_sockets_start = daemon.sockets_to(emulator.port)

        # Two storms: the second must cost no more memory than the first (no per-client
        # leak), and after both, once sessions are swept, the daemon is back near its start.
        rounds = []
        for _ in range(2):
            storm = Storm(daemon.url, n)
            clients = asyncio.gather(*(storm.client(i) for i in range(n)))
            await asyncio.wait_for(storm.everyone_called.wait(), 120)
            peak = await daemon.ametrics()
            rss_peak = daemon.rss_bytes()
            await clients
            await wait_until(lambda: daemon.metrics()["exai_connections"] == 0, 60, "connections")
            await wait_until(
                lambda: daemon.metrics()["exai_calls_in_flight"] == 0,
                CALL_S + 60,
                "calls in flight",
            )
            rounds.append((peak, rss_peak, daemon.rss_bytes()))
        sweep_s = await wait_until(
            lambda: daemon.metrics()["exai_sessions"] == 0, 180, "sessions swept"
        )
        after_metrics = await daemon.ametrics()
        rss_after, fds_after = daemon.rss_bytes(), daemon.open_fds()
        pool_start, pool_after = provider_sockets_start, daemon.sockets_to(emulator.port)

        tasks_after = 0

        async def tasks_settled() -> bool:
            nonlocal tasks_after
            tasks_after = (await _status(daemon.url))["tasks"]
            return bool(tasks_after == before["tasks"])

        await wait_until(tasks_settled, 30, "asyncio tasks back to where they started")
        after = await _status(daemon.url)
        # status counts itself among the calls in flight, before and after alike.
        assert after["in_flight"] == before["in_flight"] == 1 and after["queued"] == 0
        for name, provider in after["providers"].items():
            assert provider.get("in_flight", 0) == 0 and provider.get("waiting", 0) == 0, name

        # Every slot is free again: the whole capacity at once, not one OVER_CAPACITY.
        per_client = 50
        check_clients = [
            ExaiClient(daemon.url, TOKEN, ping_interval=None) for _ in range(CAPACITY // per_client)
        ]
        await asyncio.gather(*(c.connect() for c in check_clients))
        results = await asyncio.gather(
            *(
                c.call("echo", {"text": "x", "delay_s": 0.5}, wait_s=60)
                for c in check_clients
                for _ in range(per_client)
            )
        )
        await asyncio.gather(*(c.close() for c in check_clients))
        errors = [r.error for r in results if r.error is not None]
        assert errors == [], errors[:3]

        problems = daemon.log_problems()
        assert problems == [], problems[:5]
        mib = 1024 * 1024
        figures.record(
            "storm",
            clients=n,
            storms=len(rounds),
            vanish_modes=dict(sorted(storm.tally.items())),
            calls_in_flight_peak=int(max(r[0]["exai_calls_in_flight"] for r in rounds)),
            sessions_peak=int(max(r[0]["exai_sessions"] for r in rounds)),
            connections_after=int(after_metrics["exai_connections"]),
            calls_in_flight_after=int(after_metrics["exai_calls_in_flight"]),
            queued_after=int(after_metrics["exai_calls_queued"]),
            tasks_before=before["tasks"],
            tasks_after=tasks_after,
            sessions_after_sweep=int(after_metrics["exai_sessions"]),
            sweep_s=round(sweep_s, 1),
            capacity_check_calls=len(results),
            capacity_check_errors=len(errors),
            rss_start_mib=round(rss_start / mib, 1),
            rss_peak_mib=round(max(r[1] for r in rounds) / mib, 1),
            rss_after_round_mib=[round(r[2] / mib, 1) for r in rounds],
            rss_after_mib=round(rss_after / mib, 1),
            fds_start=fds_start,
            fds_after=fds_after,
            provider_pool_sockets=[pool_start, pool_after],
            error_log_lines=len(problems),
        )
        # Sockets beyond the start are the provider client's keep-alive pool, bounded by it.
        assert fds_after - pool_after <= fds_start - pool_start
        assert rounds[1][2] - rounds[0][2] <= SECOND_STORM_MIB * mib, rounds
        assert rss_after - rss_start <= RSS_MARGIN_MIB * mib, (rss_start, rss_after)
    finally:
        daemon.stop()
