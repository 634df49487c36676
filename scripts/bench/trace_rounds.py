"""Tracing off against tracing on, every call sampled and exported, same rounds.

Part of the protocol benchmark (``python -m scripts.bench.protocol``, ``make
bench``): in each round two daemons are started afresh, exai with tracing off
and exai with tracing on (``OTEL_TRACES_SAMPLER=always_on``, exporting over
OTLP/HTTP to a stand-in collector on loopback that answers 200 at once and
keeps the connection open, as the OpenTelemetry Collector and Phoenix do), and
they take turns in slices (:func:`scripts.bench.protocol._concurrent_turns`)
at 1, 16 and 50 connections: one connection calling sequentially (slices of
250 calls), then 16 and 50 connections calling at once. After each slice of
the traced daemon, its span writer process is let finish exporting what the
slice sent (until it has used no CPU for 0.3 s) before the next slice starts,
so its work does not land in the other daemon's time; how long it stayed busy
is reported, and its CPU per call beside the daemon's, and the daemon's
event-loop thread's alone, over each level's whole turn (the connections'
handshakes and warm-up calls included; at 16 and 50 connections that thread,
pinned to one core, and the CPU the other processes take from the two cores
are what limit calls/s).

The slices are short (100 calls a connection) and what a daemon left to do
when its slice ended (the span writer's encoding and export, the request log's
rows) is let finish before the next slice, outside the slice's time; so at 16
connections most of the writer's work is not in the figure. Each round then
measures the same two daemons under load that does not stop
(:func:`_sustained`: 16 and 50 connections calling for two seconds a turn, two
turns each), where the writer's work falls inside the time measured, as it
does for a daemon under constant load; those calls/s are reported beside the
slices', without a target of their own.

The collector keeps every request's bytes and, after the round, counts the
spans they carried (decoding them then, not while the daemons are measured):
every span of every call must have arrived (four per ``echo`` call: the
face's, admission, execute_tool and audit).

Targets (issue 39): p50 with tracing on at most 1.3x of off (one connection:
at 16 and 50, each connection calling again as soon as it is answered, p50's
ratio is the inverse of calls/s's), and calls/s at 16 and 50 connections at
least 0.7x of off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

from scripts.bench.common import daemon_process, free_port
from scripts.bench.protocol import FRAME, _open, _roundtrip

__all__ = ["COUNTING_COLLECTOR", "report", "run_rounds"]

COUNTING_COLLECTOR = """
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

bodies = []
class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the connection, as OTLP collectors do
    def do_POST(self):
        bodies.append(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def do_GET(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest)
        taken, bodies[:] = list(bodies), []
        spans = 0
        for body in taken:
            for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                for ss in rs.scope_spans:
                    spans += len(ss.spans)
        out = f"{spans} {len(taken)}".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
"""

SPANS_PER_CALL = 4  # call_tool echo, admission, execute_tool echo, audit
CONNS = (1, 16, 50)
SUSTAINED_CONNS = (16, 50)


async def _listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


def _collector_count(port: int) -> tuple[int, int]:
    """Spans and posts the collector took since it was last asked."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as answer:
        spans, posts = answer.read().split()
    return int(spans), int(posts)


async def run_rounds(rounds: int = 3, sequential_n: int = 4000, per_conn: int = 400,
                     slices: int = 4, pin: bool = True,
                     sustained_s: float = 2.0) -> dict[str, Any]:  # fmt: skip
    from scripts.bench.protocol import _concurrent_turns, _cpus, _pin, _settle

    cpus = _cpus() if pin else None
    client_cpus = os.sched_getaffinity(0) if cpus is not None else None
    if cpus is not None:
        os.sched_setaffinity(0, {cpus[0]})
    sink_port = free_port()
    sink = subprocess.Popen([sys.executable, "-c", COUNTING_COLLECTOR, str(sink_port)])
    traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
              "OTEL_TRACES_SAMPLER": "always_on"}  # fmt: skip
    figures: dict[int, dict[str, list[dict[str, float]]]] = {
        n: {"off": [], "on": []} for n in CONNS
    }
    sustained: dict[int, dict[str, list[float]]] = {n: {"off": [], "on": []}
                                                     for n in SUSTAINED_CONNS}  # fmt: skip
    sustained_tail: dict[int, list[float]] = {n: [] for n in SUSTAINED_CONNS}
    cpu = {name: {"daemon_s": 0.0, "writer_s": 0.0, "calls": 0} for name in ("off", "on")}
    loop_cpu = {name: [0.0, 0] for name in ("off", "on")}  # event-loop thread: seconds, calls
    delivered: list[tuple[int, int, int]] = []  # (spans expected, spans taken, posts)
    try:
        await _listening(sink_port)
        for _ in range(rounds):
            calls = 0
            async with contextlib.AsyncExitStack() as stack:
                servers = []
                for name, env in (("off", {}), ("on", traced)):
                    url, pid = await stack.enter_async_context(daemon_process(**env))
                    _pin(pid, cpus)
                    servers.append((name, url, pid))
                await _settle([pid for _, _, pid in servers])
                for conns in CONNS:
                    n, k = (sequential_n, sequential_n // 250) if conns == 1 else (per_conn, slices)
                    before = {name: _thread_cpu_s(pid) for name, _, pid in servers}
                    turns = await _concurrent_turns(servers, conns, n, k, cpu)
                    made = conns * (1 + (n // k) * k)  # the warm-up call, then the slices
                    calls += made
                    for name, _, pid in servers:
                        loop_cpu[name][0] += _thread_cpu_s(pid) - before[name]
                        loop_cpu[name][1] += made
                    for name, result in turns.items():
                        figures[conns][name].append(result)
                for conns in SUSTAINED_CONNS:
                    rates, made_by, tail = await _sustained(servers, conns, sustained_s)
                    calls += made_by["on"]
                    sustained_tail[conns].append(tail)
                    for name, rate in rates.items():
                        sustained[conns][name].append(rate)
            # The traced daemon has stopped, exporting what it had queued.
            spans, posts = _collector_count(sink_port)
            delivered.append((calls * SPANS_PER_CALL, spans, posts))
    finally:
        if client_cpus is not None:
            os.sched_setaffinity(0, client_cpus)
        sink.terminate()
        sink.wait(timeout=10)
    medians = {
        n: {name: _median(runs) for name, runs in by_name.items()} for n, by_name in figures.items()
    }
    return {
        "medians": medians,
        "sustained": {
            n: {name: statistics.median(r) for name, r in by_name.items()}
            for n, by_name in sustained.items()
        },
        "sustained_tail_ms": {n: max(t) * 1e3 for n, t in sustained_tail.items()},
        "cpu_us_per_call": {
            name: {
                "daemon": c["daemon_s"] / c["calls"] * 1e6,
                "writer": c["writer_s"] / c["calls"] * 1e6,
                "loop": loop_cpu[name][0] / loop_cpu[name][1] * 1e6,
            }
            for name, c in cpu.items()
        },
        "delivered": delivered,
        "rounds": rounds,
        "pinned": cpus is not None,
        "load": os.getloadavg(),
    }


async def _sustained(servers: list[tuple[str, str, int]], conns: int, seconds: float,
                     turns: int = 2) -> tuple[dict[str, float], dict[str, int], float]:  # fmt: skip
    """Calls/s with ``conns`` connections calling without pause for ``seconds``, the
    daemons taking ``turns`` turns each (in rotated order), and nothing left out:
    whatever the traced daemon's span writer does meanwhile is in its turn, as
    under load that does not stop. The median of each daemon's turns. After each
    turn, the daemon's deferred work is let finish before the next daemon's
    turn (:func:`scripts.bench.protocol._writer_idle`): what is left of it then
    is reported: the longest the traced daemon's writer stayed busy after a turn.
    Returns the rates, each daemon's calls and that longest tail (seconds)."""
    from scripts.bench.protocol import _writer_idle

    sockets = {name: [await _open(url, True) for _ in range(conns)] for name, url, _ in servers}
    pids = {name: pid for name, _, pid in servers}
    rates: dict[str, list[float]] = {name: [] for name in sockets}
    made = dict.fromkeys(sockets, 0)
    tail = 0.0
    names = list(sockets)
    for turn in range(turns):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            group, count = sockets[name], [0]
            stop = time.perf_counter() + seconds

            async def worker(ws: Any, k: int, stop: float = stop, count: list[int] = count,
                             tag: str = f"u{turn}") -> None:  # fmt: skip
                i = 0
                while time.perf_counter() < stop:
                    await _roundtrip(ws, FRAME.replace('"r"', f'"{tag}-{k}-{i}"'))
                    i += 1
                count[0] += i

            start = time.perf_counter()
            await asyncio.gather(*(worker(ws, k) for k, ws in enumerate(group)))
            rates[name].append(count[0] / (time.perf_counter() - start))
            made[name] += count[0]
            busy = await _writer_idle(pids[name])
            if name == "on":
                tail = max(tail, busy)
    await asyncio.gather(*(ws.close() for group in sockets.values() for ws in group))
    return {name: statistics.median(r) for name, r in rates.items()}, made, tail


def _thread_cpu_s(pid: int) -> float:
    """CPU seconds of a daemon's main thread (its event loop) alone: the calls' and their
    spans' work, without the threads beside it (the store's, the span hand-over)."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def report(r: dict[str, Any]) -> str:
    rows = ["| measure | tracing off | tracing on, every call | on / off | target |",
            "|---|---|---|---|---|"]  # fmt: skip
    for conns in CONNS:
        off, on = r["medians"][conns]["off"], r["medians"][conns]["on"]
        label = "1 conn" if conns == 1 else f"{conns} conns"
        for key, name, unit, target in (
            # p50's target is one connection's: with 16 or 50 connections each calling as
            # soon as its last call is answered, the round trip is the connections over
            # the calls/s (Little's law), and its ratio the inverse of calls/s's.
            ("p50_us", "p50 round trip", " µs", "≤ 1.3x" if conns == 1 else ""),
            ("p99_us", "p99 round trip", " µs", ""),
            ("calls_per_s", "calls/s", "", "≥ 0.7x" if conns > 1 else ""),
        ):
            rows.append(f"| {name}, {label} | {off[key]:.0f}{unit} | {on[key]:.0f}{unit} | "
                        f"{on[key] / off[key]:.2f}x | {target} |")  # fmt: skip
        rows.append(f"| span writer still busy after a slice, {label} | | "
                    f"{on['writer_tail_ms']:.0f} ms | | |")  # fmt: skip
    for conns in SUSTAINED_CONNS:
        off, on = r["sustained"][conns]["off"], r["sustained"][conns]["on"]
        rows.append(f"| calls/s, {conns} conns calling without pause (sustained, all counted) | "
                    f"{off:.0f} | {on:.0f} | {on / off:.2f}x | |")  # fmt: skip
        rows.append(f"| span writer still busy after a sustained turn, {conns} conns, longest | | "
                    f"{r['sustained_tail_ms'][conns]:.0f} ms | | |")  # fmt: skip
    spent = r["cpu_us_per_call"]
    rows.append(f"| CPU per call (all slices): daemon | {spent['off']['daemon']:.1f} µs | "
                f"{spent['on']['daemon']:.1f} µs | | |")  # fmt: skip
    rows.append(f"| CPU per call: the daemon's event-loop thread alone (connecting included) | "
                f"{spent['off']['loop']:.1f} µs | {spent['on']['loop']:.1f} µs | "
                f"{spent['on']['loop'] / spent['off']['loop']:.2f}x | |")  # fmt: skip
    rows.append(f"| CPU per call: span writer | | {spent['on']['writer']:.1f} µs | | |")
    expected = sum(e for e, _, _ in r["delivered"])
    taken = sum(t for _, t, _ in r["delivered"])
    posts = sum(p for _, _, p in r["delivered"])
    rows.append(f"| spans the collector took, of the spans the calls made | | "
                f"{taken:,} of {expected:,} ({posts:,} posts) | | all |")  # fmt: skip
    load = r["load"]
    rows.append(f"| load average at the end (1, 5, 15 min) | {load[0]:.2f}, {load[1]:.2f}, "
                f"{load[2]:.2f} | | | |")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run_rounds())
    print("### Tracing (exai echo tool)\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
