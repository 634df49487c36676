"""Several daemons behind HAProxy on one Postgres, and the conversations that load them.

Shared by the short cluster test (``make test``), the long one (``make
reliability``) and ``scripts/bench/cluster.py``. Every part is real: each daemon
is ``exai serve`` in a subprocess (so SIGKILL is a real death), HAProxy runs
``deploy/haproxy.cfg`` as shipped, the store is a real Postgres, the model calls
go through the real SDKs to the provider emulator, and the load is driven by the
project's own client (:class:`exai.client.ExaiClient`, reconnecting and
re-sending with the same ``request_id``).

Each daemon calls the emulator with a Kimi key of its own, so the emulator's
request log tells which daemon made each model call, and which were in flight
on a daemon when it was killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from exai.client import ClientError, ExaiClient
from exai.emulators.haproxy import TempHaproxy
from exai.emulators.provider import EmulatorServer
from tests.reliability.harness import DaemonProcess, percentiles, provider_env

__all__ = ["Cluster", "Kill", "LoadReport", "check_turns", "model_calls", "run_conversations"]

MODEL = "kimi-k2.6"
TOKEN = "cluster-test-token-5b1d"
_MARK = re.compile(r"conv (\d+) turn (\d+)")


def daemon_key(index: int) -> str:
    return f"sk-cluster-daemon-{index}"


@dataclass
class Kill:
    daemon: int
    at: float  # time.time()
    graceful: bool
    restarted_after_s: float = 0.0


class Cluster:
    """``n`` daemons on one Postgres database, HAProxy in front of them."""

    def __init__(self, workdir: Path, n: int, store_url: str, emulator: EmulatorServer,
                 **env: str) -> None:  # fmt: skip
        self.daemons = [
            DaemonProcess(
                workdir / f"d{i + 1}",
                **{
                    **provider_env(emulator, kimi_key=daemon_key(i + 1)),
                    "EXAI_STORE_URL": store_url,
                    "EXAI_WS_TOKEN": TOKEN,
                    "EXAI_SHUTDOWN_GRACE_S": "15",
                    "EXAI_RATE_LIMIT_PER_MIN": "0",
                    "EXAI_LOG_LEVEL": "warning",
                    "EXAI_MEMORY_ENABLED": "false",
                    **env,
                },
            )
            for i in range(n)
        ]
        self.lb = TempHaproxy([d.port for d in self.daemons])
        self.kills: list[Kill] = []

    @property
    def url(self) -> str:
        return self.lb.url

    async def start(self) -> Cluster:
        # The first daemon migrates the schema; the rest start together.
        await asyncio.to_thread(self.daemons[0].start, 60.0)
        await asyncio.gather(*(asyncio.to_thread(d.start, 60.0) for d in self.daemons[1:]))
        self.lb.start()
        await self.wait_all_up()
        return self

    async def wait_all_up(self, timeout_s: float = 15.0) -> None:
        """Until HAProxy has seen every daemon's /health (through a connect per daemon)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(d.alive() and d.http("/health")[0] == 200 for d in self.daemons):
                await asyncio.sleep(0.8)  # HAProxy's rise: 2 checks 300 ms apart
                return
            await asyncio.sleep(0.1)
        raise TimeoutError("not every daemon came up")

    async def kill_and_restart(self, index: int, *, graceful: bool, down_s: float = 0.5) -> Kill:
        """SIGKILL (or SIGTERM, draining) one daemon, then start it again on its port."""
        daemon = self.daemons[index]
        kill = Kill(index + 1, time.time(), graceful)
        self.kills.append(kill)
        if graceful:
            await asyncio.to_thread(daemon.stop, signal.SIGTERM, 30.0)
        else:
            await asyncio.to_thread(daemon.kill)
        await asyncio.sleep(down_s)
        await asyncio.to_thread(daemon.start, 60.0)
        kill.restarted_after_s = round(time.time() - kill.at, 2)
        return kill

    def metric_total(self, name: str) -> float:
        return sum(d.metrics().get(name, 0.0) for d in self.daemons if d.alive())

    def stop(self) -> None:
        self.lb.stop()
        for d in self.daemons:
            d.stop(signal.SIGTERM, 20.0)


@dataclass
class LoadReport:
    turns_ok: int = 0
    latencies_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    retries: int = 0  # calls sent again after a retryable error
    reconnects: int = 0
    replayed: int = 0  # answers marked replayed (from a cache or the store)
    threads: dict[int, str] = field(default_factory=dict)  # conversation -> continuation_id
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "turns_ok": self.turns_ok,
            "failures": len(self.failures),
            "retries_after_retryable_error": self.retries,
            "reconnects": self.reconnects,
            "answers_replayed": self.replayed,
            "elapsed_s": round(self.elapsed_s, 2),
            "turns_per_s": round(self.turns_ok / self.elapsed_s, 1) if self.elapsed_s else 0,
            "latency": percentiles(self.latencies_s),
        }


async def run_conversations(url: str, clients: int, conversations: int, turns: int,
                            *, tool_wait_s: float = 120.0,
                            report: LoadReport | None = None) -> LoadReport:  # fmt: skip
    """``clients`` clients share ``conversations`` conversations of ``turns`` chat turns;
    ``report``, when given, is filled in as they go (for a caller watching progress)."""
    report = LoadReport() if report is None else report
    todo: asyncio.Queue[int] = asyncio.Queue()
    for i in range(conversations):
        todo.put_nowait(i)

    async def worker() -> None:
        client = ExaiClient(url, TOKEN, reconnect=True, backoff_base_s=0.05, backoff_max_s=1.0,
                            connect_attempts=20, ping_interval=5.0, ping_timeout=5.0)  # fmt: skip
        await client.connect()
        try:
            while not todo.empty():
                conv = todo.get_nowait()
                await _conversation(client, conv, turns, report, tool_wait_s)
        finally:
            report.reconnects += client.reconnects
            await client.close()

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(clients)))
    report.elapsed_s = time.monotonic() - started
    return report


async def _conversation(client: ExaiClient, conv: int, turns: int, report: LoadReport,
                        wait_s: float) -> None:  # fmt: skip
    cid: str | None = None
    for turn in range(turns):
        arguments: dict[str, Any] = {"prompt": f"conv {conv} turn {turn}", "model": MODEL}
        if cid is not None:
            arguments["continuation_id"] = cid
        rid = f"c{conv}-t{turn}"
        started = time.perf_counter()
        for attempt in range(30):
            try:
                result = await client.call("chat", arguments, request_id=rid, wait_s=wait_s)
            except (ClientError, TimeoutError) as exc:
                report.failures.append(f"{rid}: {type(exc).__name__}: {exc}")
                return
            error = result.error
            if error is None:
                break
            if not error.retryable or attempt == 29:
                report.failures.append(f"{rid}: {error.code}: {error.message}")
                return
            report.retries += 1
            await asyncio.sleep(min(error.retry_after_s or 0.2, 1.0))
        report.latencies_s.append(time.perf_counter() - started)
        report.turns_ok += 1
        report.replayed += bool(result.metadata.replayed)
        cid = cid or result.metadata.continuation_id
        if cid is not None:
            report.threads[conv] = cid


async def check_turns(store_url: str, threads: dict[int, str], turns: int) -> dict[str, Any]:
    """Turns lost and turns stored twice, read from the shared store itself; and when
    each turn was stored (``stored_at``, by ``(conversation, turn)``)."""
    conn = await asyncpg.connect(store_url)
    try:
        rows = await conn.fetch(
            "SELECT thread_id, content, created_at FROM exai.messages WHERE role = 'user'"
            " ORDER BY thread_id, seq"
        )
    finally:
        await conn.close()
    stored: dict[str, list[int]] = defaultdict(list)
    stored_at: dict[tuple[int, int], float] = {}
    for thread_id, content, created_at in rows:
        match = _MARK.search(content or "")
        if match:
            key = (int(match.group(1)), int(match.group(2)))
            stored[thread_id].append(key[1])
            stored_at[key] = min(created_at, stored_at.get(key, created_at))
    lost = duplicated = out_of_order = 0
    for cid in threads.values():
        seen = stored.get(cid, [])
        counts = Counter(seen)
        lost += sum(1 for t in range(turns) if counts[t] == 0)
        duplicated += sum(c - 1 for c in counts.values() if c > 1)
        out_of_order += seen != sorted(seen)
    return {"conversations": len(threads), "turns_lost": lost, "turns_duplicated": duplicated,
            "threads_out_of_order": out_of_order, "stored_at": stored_at}  # fmt: skip


def model_calls(
    emulator: EmulatorServer, kills: list[Kill], stored_at: dict[tuple[int, int], float]
) -> dict[str, Any]:
    """Model calls made more than once, against those in flight on a daemon at its kill.

    A call was in flight at a kill when the killed daemon sent it before the kill
    and its turn was stored after it (by whichever daemon finished it): its answer
    had not yet become a stored turn.
    """
    requests = [r for r in emulator.requests if r.get("vendor") == "kimi"]
    keyed: list[tuple[tuple[int, int], dict[str, Any]]] = []
    for r in requests:
        messages = r["body"].get("messages") or []
        users = [m for m in messages if m.get("role") == "user"]
        match = _MARK.search(str(users[-1].get("content"))) if users else None
        if match:
            keyed.append(((int(match.group(1)), int(match.group(2))), r))
    keys = Counter(key for key, _ in keyed)
    repeated = sum(c - 1 for c in keys.values() if c > 1)
    per_kill = []
    for kill in kills:
        auth = f"Bearer {daemon_key(kill.daemon)}"
        in_flight = sum(
            1
            for key, r in keyed
            if r["headers"].get("authorization") == auth
            and r["received_at"] <= kill.at
            and stored_at.get(key, float("inf")) > kill.at
        )
        per_kill.append({"daemon": kill.daemon, "graceful": kill.graceful, "in_flight": in_flight,
                         "restarted_after_s": kill.restarted_after_s})  # fmt: skip
    return {"model_calls": len(requests), "distinct_turns_called": len(keys),
            "repeated": repeated, "in_flight_at_kills": sum(k["in_flight"] for k in per_kill),
            "repeated_after_sigkill": _repeated_for(keyed, kills, graceful=False),
            "repeated_after_sigterm": _repeated_for(keyed, kills, graceful=True),
            "kills": per_kill}  # fmt: skip


def _repeated_for(keyed: list[tuple[tuple[int, int], dict[str, Any]]], kills: list[Kill],
                  *, graceful: bool) -> int:  # fmt: skip
    """Repeated calls whose first attempt was on a daemon stopped this way."""
    first: dict[tuple[int, int], dict[str, Any]] = {}
    seen: Counter[tuple[int, int]] = Counter()
    for key, r in keyed:
        first.setdefault(key, r)
        seen[key] += 1
    n = 0
    for key, count in seen.items():
        if count < 2:
            continue
        r = first[key]
        auth = r["headers"].get("authorization")
        if any(k.graceful == graceful and auth == f"Bearer {daemon_key(k.daemon)}"
               and r["received_at"] <= k.at for k in kills):  # fmt: skip
            n += 1
    return n


@contextlib.asynccontextmanager
async def running_cluster(workdir: Path, n: int, store_url: str, emulator: EmulatorServer,
                          **env: str) -> Any:  # fmt: skip
    cluster = Cluster(workdir, n, store_url, emulator, **env)
    try:
        await cluster.start()
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)
