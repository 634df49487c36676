"""Protocol overhead: exai's ``echo`` tool against a bare websockets echo server.

The servers run as subprocesses (so the client in this process does not share
their event loop or their core), and all are driven by the same client code:
send one ``call_tool`` frame, read until a frame that is not ``call_tool_ack``
arrives. The bare server answers with the frame itself, the same size; exai
answers with a ``call_tool_res`` (an ack first only for a call still running
after its first step, which ``echo`` never is). Reported: p50/p99 round trip and
calls per second for one connection calling sequentially and for 50 connections
calling concurrently, each the median of five rounds, and the daemon's resident
memory per idle connection. In each round the servers take turns, a slice
each in rotated order: for one connection every 250 calls, for 50 connections
every 100 calls per connection (four slices of 5,000 calls). So a burst of load
from elsewhere on the machine (a virtual machine's neighbours moved the bare
echo's p50 by up to 48 µs between two back-to-back measurements) lands on all
of them rather than on one. At 50 connections, one server after another with
one turn each had let a burst fall on a single server's turn: in one run audit
off kept 0.82x of the bare echo's calls/s and audit on 0.47x. After each
50-connection slice of the daemon with the audit trail on, its writer is let
finish storing what the slice sent (until it has used no CPU for 0.3 s, longer
than the daemon's 0.2 s hand-over interval) before the next slice starts, and
how long it stayed busy is reported: its work is counted as CPU per call, and
does not land in another server's slice.
Every round starts its servers afresh: daemons of the same code, each measured as
a whole, differed by up to 76 µs at p50 in one run, and a median over fresh
processes does not rest on one of them.

On a machine with two cores or more, the client runs on the first and every
server's event loop on the second (``sched_setaffinity``; an audit writer
process stays free to run on either). Left to the scheduler, where each process
happened to land moved a daemon's 1-connection p50 by up to 20 µs between runs
of the same code, as much as the audit trail's whole budget; pinned, runs of the
same code agree within a few microseconds. Every server is pinned alike, the
bare echo included, so the comparison stays like for like.

exai runs twice: with the audit trail off, and on as it is by default (the
``none`` sink: events kept in the local outbox's archive), so the cost of the
audit trail is measured in the same run. Targets: with audit on, p50 at most
1.3x the bare echo, audit's share (on minus off) at most 15% of the bare round
trip, and at 50 connections, throughput with audit on at least 0.8x of off. For
each exai daemon the CPU time per call of the daemon and of its audit writer
process is reported too (from ``/proc``, over the 50-connection rounds), which
a busy machine disturbs less than wall-clock figures.

Tracing off against tracing on (every call sampled and exported to a stand-in
collector), at 1, 16 and 50 connections, is measured after these rounds, in
rounds of its own: :mod:`scripts.bench.trace_rounds`.

With ``EXAI_BENCH_BASE_SRC`` naming another tree's ``src/`` (for example one
taken with ``git archive <commit> src``), a fifth server in the same rounds is
that tree's daemon, audit off: the "before" of a change to the daemon's
structure, measured beside the "after".

Run: ``python -m scripts.bench.protocol`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from scripts.bench.common import daemon_process, free_port, wait_for_port

__all__ = ["main"]

ECHO_SERVER = """
import asyncio, sys
from websockets.asyncio.server import serve

async def echo(ws):
    async for msg in ws:
        await ws.send(msg)

async def main():
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), compression=None, max_size=2**25):
        await asyncio.Future()

asyncio.run(main())
"""

COLLECTOR = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Sink(BaseHTTPRequestHandler):
    posts = 0
    protocol_version = "HTTP/1.1"  # keeps the connection, as OTLP collectors do
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Sink.posts += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def do_GET(self):
        body = str(Sink.posts).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
"""

# How long a daemon's deferred work must use no CPU to count as done (see _writer_idle).
_WRITER_QUIET_S = 0.3

FRAME = json.dumps({"op": "call_tool", "request_id": "r", "name": "echo",
                    "arguments": {"text": "x" * 64}})  # fmt: skip


def _cpu_s(pid: int) -> float:
    """User plus system CPU time of a process, in seconds."""
    return _stat_cpu_s(Path(f"/proc/{pid}/stat"))


def _stat_cpu_s(stat: Path) -> float:
    """User plus system CPU time of a process or thread from its ``stat`` file."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _open(url: str, exai: bool) -> ClientConnection:
    ws = await connect(url, compression=None, max_size=2**25)
    if exai:
        await ws.send(json.dumps({"op": "hello"}))
        await ws.recv()
    return ws


async def _roundtrip(ws: ClientConnection, frame: str) -> float:
    start = time.perf_counter()
    await ws.send(frame)
    while True:
        msg = await ws.recv()
        if '"call_tool_ack"' not in msg[:40]:
            return time.perf_counter() - start


async def _sequential(url: str, exai: bool, n: int) -> dict[str, float]:
    """``n`` calls one after another on one connection, after 200 to warm up."""
    return (await _interleaved([("", url, exai)], n))[""]


async def _interleaved(
    targets: list[tuple[str, str, bool]], n: int, slice_n: int = 250
) -> dict[str, dict[str, float]]:
    """:func:`_sequential` for several servers at once, taking turns every ``slice_n``
    calls (each slice in a rotated order), so that whatever else the machine does
    while they are measured lands on all of them alike."""
    slice_n = min(slice_n, n)
    sockets = {name: await _open(url, exai) for name, url, exai in targets}
    for ws in sockets.values():
        for i in range(200):  # warm up
            await _roundtrip(ws, FRAME.replace('"r"', f'"w{i}"'))
    samples: dict[str, list[float]] = {name: [] for name in sockets}
    wall = dict.fromkeys(sockets, 0.0)
    names = list(sockets)
    for turn in range(max(1, n // slice_n)):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            ws, taken = sockets[name], samples[name]
            start = time.perf_counter()
            for i in range(slice_n):
                taken.append(await _roundtrip(ws, FRAME.replace('"r"', f'"s{turn}-{i}"')))
            wall[name] += time.perf_counter() - start
    await asyncio.gather(*(ws.close() for ws in sockets.values()))
    return {name: _summary(samples[name], wall[name]) for name in names}


async def _concurrent(url: str, exai: bool, conns: int, per_conn: int) -> dict[str, float]:
    """``conns`` connections calling at once, ``per_conn`` calls each."""
    sockets = [await _open(url, exai) for _ in range(conns)]
    samples: list[float] = []
    wall = await _drive(sockets, per_conn, samples, "c")
    await asyncio.gather(*(ws.close() for ws in sockets))
    return _summary(samples, wall)


async def _drive(sockets: list[ClientConnection], per_conn: int, samples: list[float],
                 tag: str) -> float:  # fmt: skip
    """Every socket makes ``per_conn`` calls, all at once; the wall time it took."""

    async def worker(k: int, ws: ClientConnection) -> None:
        for i in range(per_conn):
            samples.append(await _roundtrip(ws, FRAME.replace('"r"', f'"{tag}{k}-{i}"')))

    start = time.perf_counter()
    await asyncio.gather(*(worker(k, ws) for k, ws in enumerate(sockets)))
    return time.perf_counter() - start


async def _concurrent_turns(
    targets: list[tuple[str, str, int | None]], conns: int, per_conn: int, slices: int,
    cpu: dict[str, dict[str, float]],
) -> dict[str, dict[str, float]]:  # fmt: skip
    """:func:`_concurrent` for several servers, taking turns in ``slices`` slices of
    ``per_conn // slices`` calls per connection (each slice in a rotated order),
    as :func:`_interleaved` does for one connection.

    After each slice of a daemon with an audit writer, the writer is let finish
    storing what the slice sent before the next server's slice starts, so its
    work does not land in another server's time; how long it stayed busy is
    reported (``writer_tail_ms``, per slice, until its last use of CPU: the
    daemon's last hand-over of the slice included). The daemons named in ``cpu`` have
    their CPU time counted over their slices, tail included.
    """
    sockets = {name: [await _open(url, pid is not None) for _ in range(conns)]
               for name, url, pid in targets}  # fmt: skip
    pids = {name: pid for name, _, pid in targets}
    for name, group in sockets.items():
        await _drive(group, 1, [], "w")  # warm up each connection
        await _writer_idle(pids[name])
    samples: dict[str, list[float]] = {name: [] for name in sockets}
    wall = dict.fromkeys(sockets, 0.0)
    tail = dict.fromkeys(sockets, 0.0)
    names = list(sockets)
    for turn in range(slices):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            before = _cpu_snapshot(pids[name])
            wall[name] += await _drive(sockets[name], per_conn // slices, samples[name],
                                       f"s{turn}-")  # fmt: skip
            tail[name] += await _writer_idle(pids[name])
            if name in cpu:
                after = _cpu_snapshot(pids[name])
                cpu[name]["daemon_s"] += after[0] - before[0]
                cpu[name]["writer_s"] += after[1] - before[1]
                cpu[name]["calls"] += conns * (per_conn // slices)
    await asyncio.gather(*(ws.close() for group in sockets.values() for ws in group))
    return {name: {**_summary(samples[name], wall[name]),
                   "writer_tail_ms": tail[name] / slices * 1e3} for name in names}  # fmt: skip


async def _writer_idle(pid: int | None, timeout_s: float = 30.0) -> float:
    """Wait until a daemon's deferred work is done: its threads other than the event
    loop (the store's, which writes the request log's rows every 0.2 s, and the
    span hand-over) and its child processes (its audit or span writer) have used
    no CPU for ``_WRITER_QUIET_S``; the seconds until their last use. 0 for a
    server that is not a daemon.

    The quiet spell is longer than the daemon's hand-over intervals
    (``EXAI_AUDIT_FLUSH_INTERVAL_S`` and the ledger's, 0.2 s), so the slice's last
    batch, still in the daemon's buffer when the slice ends, is handed over and
    stored within it. Every daemon is waited for, with or without a writer: a
    daemon's rows written after its slice would otherwise land in the next
    server's slice, and only in the slice of a daemon that follows one without a
    writer (a writer's daemon has its rows written during its own wait).
    """
    if pid is None:
        return 0.0
    start = busy_until = time.perf_counter()
    last = _deferred_cpu_s(pid)
    while time.perf_counter() - start < timeout_s:
        await asyncio.sleep(0.05)
        now, spent = time.perf_counter(), _deferred_cpu_s(pid)
        if spent != last:
            last, busy_until = spent, now
        elif now - busy_until >= _WRITER_QUIET_S:
            break
    return busy_until - start


def _deferred_cpu_s(pid: int) -> float:
    """CPU seconds of a daemon's threads but its event loop's (the main thread), and
    of its child processes."""
    spent = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name != str(pid):
            with contextlib.suppress(OSError):  # a thread that just ended
                spent += _stat_cpu_s(task / "stat")
    return spent + sum(_cpu_s(child) for child in _children(pid))


def _median_round(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the rounds."""
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def _summary(samples: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_us": statistics.median(ordered) * 1e6,
        "p99_us": ordered[int(len(ordered) * 0.99) - 1] * 1e6,
        "calls_per_s": len(samples) / wall,
        "n": len(samples),
    }


def _cpus() -> tuple[int, int] | None:
    """The client's core and the servers' core, or None on a machine with one."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    return (cores[0], cores[1]) if len(cores) >= 2 else None


def _pin(pid: int, cpus: tuple[int, int] | None) -> None:
    """Put a server's main thread (its event loop) on the servers' core."""
    if cpus is not None:
        os.sched_setaffinity(pid, {cpus[1]})


def _cpu_snapshot(pid: int | None) -> tuple[float, float]:
    """CPU seconds of a daemon and of its child processes (the audit writer)."""
    if pid is None:
        return (0.0, 0.0)
    return _cpu_s(pid), sum(_cpu_s(child) for child in _children(pid))


async def _idle_memory(url: str, pid: int, conns: int) -> float:
    await asyncio.sleep(0.5)
    before = _rss_kib(pid)
    sockets = [await _open(url, True) for _ in range(conns)]
    await asyncio.sleep(1.0)
    after = _rss_kib(pid)
    await asyncio.gather(*(ws.close() for ws in sockets))
    return (after - before) / conns


@contextlib.asynccontextmanager
async def _echo_server(cpus: tuple[int, int] | None) -> AsyncIterator[str]:
    port = free_port()
    echo = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(port)])
    try:
        await wait_for_port(port)
        _pin(echo.pid, cpus)
        yield f"ws://127.0.0.1:{port}"
    finally:
        echo.terminate()
        echo.wait(timeout=10)


async def run(sequential_n: int = 5000, conns: int = 50, per_conn: int = 400,
              idle_conns: int = 1000, rounds: int = 5,
              base_src: str | None = None, pin: bool = True,
              slices: int = 4) -> dict[str, Any]:  # fmt: skip
    """The bare echo, exai with the audit trail off and on: all in the same rounds,
    each round with servers started for it. ``pin``: client and servers on cores
    of their own (see above)."""
    cpus = _cpus() if pin else None
    client_cpus = os.sched_getaffinity(0) if cpus is not None else None
    if cpus is not None:
        os.sched_setaffinity(0, {cpus[0]})
    daemons: list[tuple[str, dict[str, str]]] = [
        ("exai", {}),
        ("exai_audit", {"EXAI_AUDIT_ENABLED": "true"}),
    ]
    if base_src is not None:
        daemons.append(("exai_base", {"PYTHONPATH": _importable_as_exai(base_src)}))
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"sequential": [], "concurrent": []} for name in ["bare", *dict(daemons)]
    }
    cpu: dict[str, dict[str, float]] = {
        name: {"daemon_s": 0.0, "writer_s": 0.0, "calls": 0} for name in ("exai", "exai_audit")
    }
    try:
        for _ in range(rounds):
            async with contextlib.AsyncExitStack() as stack:
                bare_url = await stack.enter_async_context(_echo_server(cpus))
                servers: list[tuple[str, str, int | None]] = [("bare", bare_url, None)]
                for name, env in daemons:
                    daemon_url, daemon_pid = await stack.enter_async_context(daemon_process(**env))
                    _pin(daemon_pid, cpus)
                    servers.append((name, daemon_url, daemon_pid))
                await _settle([pid for _, _, pid in servers if pid is not None])
                taking_turns = [(name, url, pid is not None) for name, url, pid in servers]
                for name, figures in (await _interleaved(taking_turns, sequential_n)).items():
                    runs[name]["sequential"].append(figures)
                turns = await _concurrent_turns(servers, conns, per_conn, slices, cpu)
                for name, figures in turns.items():
                    runs[name]["concurrent"].append(figures)
        results: dict[str, Any] = {
            name: {mode: _median_round(r) for mode, r in modes.items()}
            for name, modes in runs.items()
        }
        for name, spent in cpu.items():
            results[name]["cpu_us_per_call"] = {
                "daemon": spent["daemon_s"] / spent["calls"] * 1e6,
                "writer": spent["writer_s"] / spent["calls"] * 1e6,
            }
        async with daemon_process() as (url, pid):
            results["idle_kib_per_conn"] = await _idle_memory(url, pid, idle_conns)
        results["pinned"] = cpus is not None
        results["rounds"] = rounds
        results["slice_calls"] = conns * (per_conn // slices)
        return results
    finally:
        if client_cpus is not None:
            os.sched_setaffinity(0, client_cpus)


def _importable_as_exai(src: str) -> str:
    """A directory to put first on PYTHONPATH so that ``exai`` is the tree at ``src``."""
    link = Path(tempfile.mkdtemp(prefix="exai-base-")) / "exai"
    link.symlink_to(Path(src).resolve())
    return str(link.parent)


def _side_by_side(before: dict[str, Any], after: dict[str, Any], header: str) -> list[str]:
    """One daemon against another, same rounds: a row per measure, ``after / before``."""
    rows = [header, "|---|---|---|---|"]
    for mode in ("sequential", "concurrent"):
        label = "1 conn" if mode == "sequential" else "50 conns"
        for key, unit, name in (("p50_us", " µs", "p50 round trip"),
                                ("p99_us", " µs", "p99 round trip"),
                                ("calls_per_s", "", "calls/s")):  # fmt: skip
            ratio = after[mode][key] / before[mode][key]
            rows.append(f"| {name}, {label} | {before[mode][key]:.0f}{unit} | "
                        f"{after[mode][key]:.0f}{unit} | {ratio:.2f}x |")  # fmt: skip
    return rows


def base_report(r: dict[str, Any]) -> str:
    """This tree's daemon against the base tree's, both audit off, same rounds."""
    header = "| measure | base tree | this tree | this / base |"
    return "\n".join(_side_by_side(r["exai_base"], r["exai"], header))


async def _settle(pids: list[int], timeout_s: float = 30.0) -> None:
    """Wait until the daemons just started (and their writers) have finished starting:
    at most a clock tick each (10 ms) over half a second. A daemon still busy
    with its start-up would slow whichever server is measured first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = sum(sum(_cpu_snapshot(pid)) for pid in pids)
        await asyncio.sleep(0.5)
        if sum(sum(_cpu_snapshot(pid)) for pid in pids) - before <= 0.01 * len(pids):
            return


def report(r: dict[str, Any]) -> str:
    b, e, a = r["bare"], r["exai"], r["exai_audit"]
    rows = [
        "| measure | bare websockets echo | exai, audit off | exai, audit on | ratio off | "
        "ratio on | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in ("sequential", "concurrent"):
        label = "1 conn" if mode == "sequential" else "50 conns"
        for key, name, unit, target in (
            ("p50_us", "p50 round trip", " µs", "on ≤ 1.3x" if mode == "sequential" else ""),
            ("p99_us", "p99 round trip", " µs", ""),
            ("calls_per_s", "calls/s", "", "on ≥ 0.6x" if mode == "concurrent" else ""),
        ):
            base = b[mode][key]
            rows.append(
                f"| {name}, {label} | {base:.0f}{unit} | {e[mode][key]:.0f}{unit} | "
                f"{a[mode][key]:.0f}{unit} | {e[mode][key] / base:.2f}x | "
                f"{a[mode][key] / base:.2f}x | {target} |"
            )
    rows.append(f"| resident memory per idle connection | | {r['idle_kib_per_conn']:.1f} KiB | "
                "| | | ≤ 64 KiB |")  # fmt: skip
    audit = audit_figures(r)
    rows += [
        "",
        "| cost of the audit trail | figure | target |",
        "|---|---|---|",
        f"| p50 with audit on against the bare echo | {audit['p50_on_ratio']:.2f}x | ≤ 1.3x |",
        f"| audit on minus off at p50, share of the bare round trip | "
        f"{audit['p50_share_of_bare']:.1%} ({audit['p50_added_us']:+.1f} µs) | ≤ 15% |",
        f"| calls/s at 50 connections, audit on against off | "
        f"{audit['throughput_on_off']:.2f}x | ≥ 0.8x |",
    ]
    rows.append(f"| audit writer still busy after a slice of {r['slice_calls']:,} calls | "
                f"{r['exai_audit']['concurrent']['writer_tail_ms']:.0f} ms | |")  # fmt: skip
    rows.append(f"| client and servers on cores of their own | "
                f"{'yes' if r.get('pinned') else 'no'} | |")  # fmt: skip
    for name, label in (("exai", "audit off"), ("exai_audit", "audit on")):
        spent = r[name]["cpu_us_per_call"]
        rows.append(f"| CPU per call at 50 connections, {label}: daemon, audit writer | "
                    f"{spent['daemon']:.1f} µs, {spent['writer']:.1f} µs | |")  # fmt: skip
    return "\n".join(rows)


def audit_figures(r: dict[str, Any]) -> dict[str, float]:
    """The audit trail's targets, from one run's medians."""
    bare = r["bare"]["sequential"]["p50_us"]
    off, on = r["exai"]["sequential"]["p50_us"], r["exai_audit"]["sequential"]["p50_us"]
    return {
        "p50_on_ratio": on / bare,
        "p50_added_us": on - off,
        "p50_share_of_bare": (on - off) / bare,
        "throughput_on_off": r["exai_audit"]["concurrent"]["calls_per_s"]
        / r["exai"]["concurrent"]["calls_per_s"],
    }


def main() -> dict[str, Any]:
    results = asyncio.run(run(base_src=os.environ.get("EXAI_BENCH_BASE_SRC") or None))
    results["audit"] = audit_figures(results)
    print("## Protocol overhead\n")
    print(report(results))
    if os.environ.get("EXAI_BENCH_TRACING", "1") != "0":
        from scripts.bench import trace_rounds

        results["tracing"] = asyncio.run(trace_rounds.run_rounds())
        print("\n### Tracing (exai echo tool)\n")
        print(trace_rounds.report(results["tracing"]))
    if "exai_base" in results:
        print("\n### This tree against the base tree (audit off)\n")
        print(base_report(results))
    return results


if __name__ == "__main__":
    main()
