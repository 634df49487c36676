"""Agent sessions kept as threads: what keeping them costs the model faces.

Two daemons of the same code and settings but ``EXAI_FACES_SESSIONS`` (``*``: every
request kept, the default; ``none``: none) in front of one provider emulator, in the
same run. The client is an agent: it sends its whole history with every request and
builds the next one from the answer it got, so each request continues the
conversation the previous one was answered in, and the "on" daemon does its real
work after each answer (match the history's longest stored head, append a turn).
Each conversation, on each face in that face's own wire format: a ~6,000-character
system prompt, a task (unique, so each conversation is a thread of its own), then
in threes: two requests answered with a tool call (``read_file``, whose ~2,000-
character result the next request carries) and one answered in text, followed by
the user's next message.

**Added latency.** One ``httpx`` client (keep-alive, answers read whole) runs such
conversations one request at a time, in alternating blocks, against the emulator
directly (as chat completions, the baseline) and against each face of both
daemons (128 conversations of 9 requests per path, in 16 rounds of blocks of 8). A
face's added latency is its p50 (p99) minus the direct calls', as in
:mod:`scripts.bench.model_faces`. After each block of the "on" daemon the bench
waits until its turns are all in the store, so that no block inherits another's
writes. The keeper writes in the lulls between answers (``exai.tools.session_keeper``),
and within a block each answer follows the one before within milliseconds, so most
turns are written in the pause after their block: how many were written while a
block was measured is counted from the store's timestamps and reported. Beside
on/off, the "off" daemon's own samples split by the parity of their round (two
halves of one daemon's work) give the ratio the bench's noise alone makes. The 64
agent loops below are the case where writes and requests meet. Target: sessions
on add at most 10% to exai's added latency.

**Agent loops.** 64 concurrent agent loops (a third on each face), each a
conversation of the same shape, every provider request taking 500 ms, on one
daemon then the other, in alternating rounds. Target: no measurable difference in
the set's wall time: "measurable" is on slower than off in every round (a sign
test: 1 in 32 by chance over 5 rounds) and by more than 1% at the median of the
rounds' on/off ratios. How long the "on" daemon took, after a set's last answer,
to hold every turn of it is reported too.

Both phases also report the daemon's CPU per call (``/proc``, all its threads and
its child processes: the "on" daemon's session writer, which keeps the turns, is
included and also given apart), which moves less with the machine's other load
than the latencies do.

**Saturated.** 32 agent loops of 9 requests, the emulator answering at once, so
the cores stay busy and no set has a lull: the turns are written while its
requests run. Reported (on/off median wall time, CPU), not a target.

**Kept, really.** The "on" daemon's SQLite file is read (polled after each of its
blocks and sets, and at the end): one thread per conversation on its face, each
with one turn per request and one message per request plus the answer (and the
system prompt), none forked, as many turns as requests answered; the "off"
daemon's store holds no thread.

Run: ``python -m scripts.bench.agent_sessions`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from exai.emulators.provider import KIMI_PREFIX
from scripts.bench.common import (
    bench_dir,
    daemon_process,
    free_port,
    prose,
    summarize,
    wait_for_http,
)
from scripts.bench.model_faces import MODEL, TOKEN, TOOL

__all__ = ["Agent", "main", "report", "run"]

FACES = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
STORED_FACE = {"chat": "openai", "messages": "anthropic", "responses": "responses"}
SESSIONS = {"on": "*", "off": "none"}


class Agent:
    """One agent's conversation on one face (``direct``: chat completions to the
    emulator): the next request's body, and what the answer adds to the history."""

    def __init__(self, face: str, tag: str, seed: int) -> None:
        self.face, self.rng = face, random.Random(seed)
        self.system = prose(self.rng, 6000)
        self.history: list[dict[str, Any]] = [{"role": "user", "content": self._task(tag)}]
        self.step = 0

    def _task(self, tag: str) -> str:
        return f"Task {tag}: {prose(self.rng, 300)}"

    def body(self) -> dict[str, Any]:
        tool_round = self.step % 3 != 2
        if self.face == "messages":
            choice: Any = {"type": "any" if tool_round else "none"}
            tools: list[Any] = [{"name": TOOL["name"], "description": TOOL["description"],
                                 "input_schema": TOOL["parameters"]}]  # fmt: skip
            return {"model": MODEL, "max_tokens": 1024, "system": self.system,
                    "messages": self.history, "tools": tools, "tool_choice": choice}  # fmt: skip
        choice = "required" if tool_round else "none"
        if self.face == "responses":
            tools = [{"type": "function", **TOOL}]
            return {"model": MODEL, "instructions": self.system, "input": self.history,
                    "tools": tools, "tool_choice": choice, "store": False}  # fmt: skip
        messages = [{"role": "system", "content": self.system}, *self.history]
        body = {"model": MODEL, "messages": messages, "tool_choice": choice,
                "tools": [{"type": "function", "function": TOOL}]}  # fmt: skip
        if self.face == "direct":  # as exai sends it: Kimi thinks in no tool round
            body["thinking"] = {"type": "disabled"}
        return body

    def take(self, answer: dict[str, Any]) -> None:
        """Add the answer, and the tool results it asked for or the user's next message."""
        result = prose(self.rng, 2000)
        calls: list[str] = []
        if self.face == "messages":
            self.history.append({"role": "assistant", "content": answer["content"]})
            calls = [b["id"] for b in answer["content"] if b["type"] == "tool_use"]
            results = [{"type": "tool_result", "tool_use_id": c, "content": result} for c in calls]
            if results:
                self.history.append({"role": "user", "content": results})
        elif self.face == "responses":
            self.history += answer["output"]
            calls = [i["call_id"] for i in answer["output"] if i["type"] == "function_call"]
            self.history += [{"type": "function_call_output", "call_id": c, "output": result}
                             for c in calls]  # fmt: skip
        else:
            message = answer["choices"][0]["message"]
            self.history.append({k: v for k, v in message.items() if v is not None})
            calls = [c["id"] for c in message.get("tool_calls") or ()]
            self.history += [{"role": "tool", "tool_call_id": c, "content": result}
                             for c in calls]  # fmt: skip
        if bool(calls) != (self.step % 3 != 2):
            raise RuntimeError(f"{self.face} step {self.step}: unexpected answer {answer}")
        if not calls:
            self.history.append({"role": "user", "content": self._task("continued")})
        self.step += 1


async def converse(client: httpx.AsyncClient, url: str, agent: Agent, steps: int) -> list[float]:
    """``steps`` requests of one conversation, one after the other: each one's seconds."""
    times = []
    for _ in range(steps):
        body = agent.body()
        start = time.perf_counter()
        response = await client.post(url, json=body)
        elapsed = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code}: {response.text[:500]}")
        agent.take(response.json())
        times.append(elapsed)
    return times


def store_state(data_dir: Path) -> dict[str, Any]:
    """What the daemon's SQLite store holds: threads per stored face, turns, messages."""
    path = data_dir / "conversations.sqlite3"
    if not path.exists():
        return {"threads": 0, "turns": 0, "faces": {}}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
        rows = db.execute(
            "SELECT t.face, COUNT(*), MIN(t.turns), MAX(t.turns), SUM(t.parent_id IS NOT NULL),"
            " MIN(m.n), MAX(m.n), SUM(t.turns) FROM threads t JOIN (SELECT thread_id,"
            " COUNT(*) AS n FROM messages GROUP BY thread_id) m ON m.thread_id = t.id"
            " WHERE t.deleted_at IS NULL GROUP BY t.face"
        ).fetchall()
    faces = {face: {"threads": n, "turns": [t0, t1], "forks": forks, "messages": [m0, m1]}
             for face, n, t0, t1, forks, m0, m1, _ in rows}  # fmt: skip
    return {"threads": sum(r[1] for r in rows), "turns": sum(r[7] for r in rows), "faces": faces}


def written_during(data_dir: Path, windows: list[tuple[float, float]]) -> int:
    """How many of the store's turns were written while one of ``windows`` (wall-clock
    start and end of the "on" daemon's blocks) was being measured."""
    with sqlite3.connect(f"file:{data_dir / 'conversations.sqlite3'}?mode=ro", uri=True) as db:
        stamps = [r[0] for r in db.execute(
            "SELECT MAX(created_at) FROM messages GROUP BY thread_id, turn")]  # fmt: skip
    return sum(any(start <= t <= end for start, end in windows) for t in stamps)


def _turns(data_dir: Path) -> int:
    with sqlite3.connect(f"file:{data_dir / 'conversations.sqlite3'}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT COALESCE(SUM(turns), 0) FROM threads").fetchone()[0])


async def settle(data_dir: Path, turns: int, timeout: float = 60.0) -> float:
    """Seconds until the store holds ``turns`` turns (polled); raises past ``timeout``."""
    start = time.perf_counter()
    while (held := _turns(data_dir)) < turns:
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"{held} turns kept of {turns} after {timeout:.0f} s")
        await asyncio.sleep(0.02)
    return time.perf_counter() - start


class Bench:
    """The emulator, the two daemons, and what has been sent to the "on" one."""

    def __init__(self, provider_url: str, daemons: dict[str, tuple[str, Path, int]]) -> None:
        self.provider_url, self.daemons = provider_url, daemons
        self.sent_on = 0  # requests answered by the "on" daemon: the turns it must keep
        self.expected: dict[str, int] = dict.fromkeys(FACES, 0)  # its conversations per face
        self.conversations = 0

    def url(self, path: str) -> str:
        if path == "direct":
            return self.provider_url + "/chat/completions"
        sessions, face = path.split("_")
        return self.daemons[sessions][0] + FACES[face]

    def agent(self, path: str) -> Agent:
        self.conversations += 1
        return Agent(path.split("_")[-1], f"{path}-{self.conversations}", self.conversations)

    def count(self, path: str, requests: int, conversations: int) -> None:
        if path.startswith("on_"):
            self.sent_on += requests
            self.expected[path[3:]] += conversations


@asynccontextmanager
async def bench(max_inflight: int) -> AsyncIterator[Bench]:
    emulator_port = free_port()
    emulator = subprocess.Popen(
        [sys.executable, "-m", "exai.emulators.provider", "--port", str(emulator_port)],
        stdout=subprocess.DEVNULL,
    )
    try:
        await wait_for_http(emulator_port)
        provider_url = f"http://127.0.0.1:{emulator_port}{KIMI_PREFIX}"
        async with AsyncExitStack() as stack:
            daemons = {}
            for sessions, value in SESSIONS.items():
                data_dir, http_port = Path(bench_dir("exai-bench-")), free_port()
                _, pid = await stack.enter_async_context(daemon_process(
                    KIMI_API_KEY="sk-bench", KIMI_BASE_URL=provider_url, EXAI_WS_TOKEN=TOKEN,
                    EXAI_HTTP_PORT=str(http_port), EXAI_DATA_DIR=str(data_dir),
                    EXAI_KIMI_MAX_INFLIGHT=str(max_inflight), EXAI_FACES_SESSIONS=value,
                ))  # fmt: skip
                daemons[sessions] = (f"http://127.0.0.1:{http_port}", data_dir, pid)
            yield Bench(provider_url, daemons)
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)


def _proc_cpu_s(stat: str) -> tuple[int, float]:
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> tuple[float, float]:
    """The CPU seconds a daemon has used (all its threads) and those of its child
    processes running now (the session writer), Linux; zeros elsewhere."""
    own = children = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent, seconds = _proc_cpu_s((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
        if int(entry.name) == pid:
            own = seconds
        elif parent == pid:
            children += seconds
    return own, children


def _client(connections: int) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {TOKEN}", "x-api-key": TOKEN,
               "anthropic-version": "2023-06-01"}  # fmt: skip
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(headers=headers, timeout=120, limits=limits)


async def _emulator(b: Bench, latency_ms: float) -> None:
    base = b.provider_url.removesuffix(KIMI_PREFIX)
    async with httpx.AsyncClient() as client:  # its record of requests goes, the latency is set
        (await client.post(base + "/_emulator/reset")).raise_for_status()
        reply = await client.post(base + "/_emulator/config", json={"latency_ms": latency_ms})
        reply.raise_for_status()


async def measure_latency(
    b: Bench, conversations: int, steps: int, rounds: int, warmup: int
) -> dict[str, Any]:
    await _emulator(b, 0)
    paths = ["direct"] + [f"{s}_{face}" for face in FACES for s in SESSIONS]
    samples: dict[str, list[float]] = {path: [] for path in paths}
    # The "off" daemon's samples again, by the parity of their round: two halves of one
    # daemon's work, whose ratio is what this bench's noise alone makes of on/off.
    halves: dict[str, tuple[list[float], list[float]]] = {face: ([], []) for face in FACES}
    # The daemon's CPU seconds over the path's blocks, and its writer process's.
    cpu = dict.fromkeys(paths, 0.0)
    writer = dict.fromkeys(paths, 0.0)
    windows: dict[str, list[tuple[float, float]]] = {face: [] for face in FACES}  # "on" blocks
    async with _client(1) as client:
        for path in paths:  # warm-up: a few whole conversations per path, not counted
            for _ in range(warmup):
                await converse(client, b.url(path), b.agent(path), steps)
            b.count(path, warmup * steps, warmup)
        await settle(b.daemons["on"][1], b.sent_on)  # its turns, too, before any block
        for round_ in range(rounds):
            order = paths[round_ % len(paths) :] + paths[: round_ % len(paths)]
            for path in order:
                block = conversations // rounds
                pid = b.daemons[path.split("_")[0]][2] if path != "direct" else 0
                before = cpu_s(pid) if pid else (0.0, 0.0)
                started = time.time()
                for _ in range(block):
                    times = await converse(client, b.url(path), b.agent(path), steps)
                    samples[path] += times
                    if path.startswith("off_"):
                        halves[path[4:]][round_ % 2].extend(times)
                if path.startswith("on_"):
                    windows[path[3:]].append((started, time.time()))
                b.count(path, block * steps, block)
                if path.startswith("on_"):  # its writes stay in its own block
                    await settle(b.daemons["on"][1], b.sent_on)
                after = cpu_s(pid) if pid else (0.0, 0.0)
                cpu[path] += after[0] - before[0] + after[1] - before[1]
                writer[path] += after[1] - before[1]
    results: dict[str, Any] = {path: summarize(s) for path, s in samples.items()}
    # The keeper writes in lulls (none in a block, where each answer follows the last
    # within milliseconds): how many turns it wrote while a block was measured anyway.
    results["written_in_blocks"] = {face: written_during(b.daemons["on"][1], spans)
                                    for face, spans in windows.items()}  # fmt: skip
    results["on_requests"] = sum(results[f"on_{face}"]["n"] for face in FACES)
    for path in paths[1:]:  # the faces' paths ("direct" is first)
        figures = results[path]
        figures["cpu_ms"] = cpu[path] * 1000 / figures["n"]
        figures["writer_cpu_ms"] = writer[path] * 1000 / figures["n"]
        figures["added_p50_ms"] = figures["p50_ms"] - results["direct"]["p50_ms"]
        figures["added_p99_ms"] = figures["p99_ms"] - results["direct"]["p99_ms"]
    direct = results["direct"]
    for face in FACES:
        on, off = results[f"on_{face}"], results[f"off_{face}"]
        for p in ("p50", "p99"):
            more, base = on[f"added_{p}_ms"] - off[f"added_{p}_ms"], off[f"added_{p}_ms"]
            on[f"{p}_share"] = more / base if base > 0 else (0.0 if more <= 0 else float("inf"))
            if not all(halves[face]):  # a single round: no second half
                off[f"{p}_aa"] = float("nan")
                continue
            even, odd = (summarize(h)[f"{p}_ms"] - direct[f"{p}_ms"] for h in halves[face])
            off[f"{p}_aa"] = odd / even if even > 0 else float("inf")
    return results


async def measure_loops(
    b: Bench, loops: int, steps: int, rounds: int, latency_ms: float
) -> dict[str, Any]:
    await _emulator(b, latency_ms)
    walls: dict[str, list[float]] = {"on": [], "off": []}
    lags: list[float] = []
    cpu = {"on": 0.0, "off": 0.0}
    writer = {"on": 0.0, "off": 0.0}
    async with _client(loops) as client:
        for round_ in range(rounds):
            for sessions in ("off", "on") if round_ % 2 == 0 else ("on", "off"):
                paths = [f"{sessions}_{face}" for face in FACES]
                agents = [(p, b.agent(p)) for p in (paths[i % 3] for i in range(loops))]
                pid = b.daemons[sessions][2]
                before = cpu_s(pid)
                start = time.perf_counter()
                await asyncio.gather(*(converse(client, b.url(p), a, steps) for p, a in agents))
                walls[sessions].append(time.perf_counter() - start)
                for path, _ in agents:
                    b.count(path, steps, 1)
                if sessions == "on":  # how long the keeper took to catch up with the answers
                    lags.append(await settle(b.daemons["on"][1], b.sent_on))
                after = cpu_s(pid)
                cpu[sessions] += after[0] - before[0] + after[1] - before[1]
                writer[sessions] += after[1] - before[1]
    paired = [on / off for on, off in zip(walls["on"], walls["off"], strict=True)]
    ratio = statistics.median(paired)
    return {"loops": loops, "steps": steps, "provider_latency_ms": latency_ms, "walls_s": walls,
            "paired": paired, "ratio": ratio, "keeper_lag_s": lags,
            "cpu_ms": {s: c * 1000 / (loops * steps * rounds) for s, c in cpu.items()},
            "writer_cpu_ms": {s: c * 1000 / (loops * steps * rounds) for s, c in writer.items()},
            # measurable: on slower in every round (a sign test) and by more than 1%
            "held": not (min(paired) > 1 and ratio > 1.01)}  # fmt: skip


async def run(
    conversations: int = 128, steps: int = 9, rounds: int = 16, warmup: int = 2,
    loops: int = 64, loop_steps: int = 6, loop_rounds: int = 5, latency_ms: float = 500,
    saturating: int = 32, saturated_rounds: int = 6,
) -> dict[str, Any]:  # fmt: skip
    async with bench(max_inflight=max(loops, 8)) as b:
        latency = await measure_latency(b, conversations, steps, rounds, warmup)
        loop_figures = await measure_loops(b, loops, loop_steps, loop_rounds, latency_ms)
        # Agents answered at once, as many as keep the cores busy: no lull in a set, so
        # the turns are written while its requests run (each second, or as a batch fills).
        saturated = await measure_loops(b, saturating, steps, saturated_rounds, 0)
        kept = {s: store_state(daemon[1]) for s, daemon in b.daemons.items()}
        expected = {STORED_FACE[f]: n for f, n in b.expected.items()}
        sent = b.sent_on
    # Every conversation on the "on" daemon is one thread of its face, unforked;
    # the latency phase's have ``steps`` turns, the loops' ``loop_steps``.
    turns = sorted({steps, loop_steps})
    messages = sorted({1 + 2 * steps, 1 + 2 * loop_steps})
    verified = (
        kept["off"]["threads"] == 0
        and kept["on"]["turns"] == sent
        and all(
            kept["on"]["faces"].get(face, {}).get("threads") == n
            and kept["on"]["faces"][face]["turns"] == [turns[0], turns[-1]]
            and kept["on"]["faces"][face]["messages"] == [messages[0], messages[-1]]
            and kept["on"]["faces"][face]["forks"] == 0
            for face, n in expected.items()
        )
    )
    return {"latency": latency, "loops": loop_figures, "saturated": saturated, "kept": kept,
            "expected": expected, "sent_on": sent, "verified": verified}  # fmt: skip


def report(results: dict[str, Any]) -> str:
    latency, loops, kept = results["latency"], results["loops"], results["kept"]
    direct = latency["direct"]
    rows = [
        "| face | added p50, off | added p50, on | on/off at p50 | added p99, off "
        "| added p99, on | on/off at p99 | off/off, rounds odd/even, p50 and p99 | daemon CPU "
        "per call, off / on (of which the session writer) | calls each |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    missed = []
    for face, route in FACES.items():
        on, off = latency[f"on_{face}"], latency[f"off_{face}"]
        missed += [f"`{route}` at {p}" for p in ("p50", "p99") if on[f"{p}_share"] > 0.10]
        rows.append(
            f"| `{route}` | {off['added_p50_ms']:+.2f} ms | {on['added_p50_ms']:+.2f} ms "
            f"| {1 + on['p50_share']:.2f}x | {off['added_p99_ms']:+.2f} ms "
            f"| {on['added_p99_ms']:+.2f} ms | {1 + on['p99_share']:.2f}x "
            f"| {off['p50_aa']:.2f}x, {off['p99_aa']:.2f}x "
            f"| {off['cpu_ms']:.2f} / {on['cpu_ms']:.2f} ms ({on['writer_cpu_ms']:.2f}) "
            f"| {on['n']} |"
        )
    written = latency["written_in_blocks"]
    by_face = ", ".join(f"{n} in `{FACES[face]}` blocks" for face, n in written.items())
    lines = [
        f"Emulator directly: p50 {direct['p50_ms']:.2f} ms, p99 {direct['p99_ms']:.2f} ms "
        f"({direct['n']} calls).\n",
        "\n".join(rows),
        f"\nTurns the \"on\" daemon wrote while one of its blocks was measured: "
        f"{sum(written.values())} of {latency['on_requests']} ({by_face}; the rest in the "
        "lulls after them).\n",
        "Sessions on add at most 10% to exai's added latency: "
        + ("**held** on every face at p50 and p99.\n" if not missed else
           f"**not held** on {', '.join(missed)}.\n"),
    ]  # fmt: skip
    walls = {s: ", ".join(f"{w:.2f}" for w in loops["walls_s"][s]) for s in ("off", "on")}
    lines.append(
        f"{loops['loops']} concurrent agent loops of {loops['steps']} requests, "
        f"{loops['provider_latency_ms']:.0f} ms per provider request, off and on in "
        f"alternating rounds: wall time off {walls['off']} s, on {walls['on']} s; on/off per "
        f"round {', '.join(f'{r:.3f}' for r in loops['paired'])}, median "
        f"**{loops['ratio']:.3f}x** "
        f"(daemon CPU per call {loops['cpu_ms']['off']:.2f} ms off, "
        f"{loops['cpu_ms']['on']:.2f} ms on, of which the session writer "
        f"{loops['writer_cpu_ms']['on']:.2f} ms) "
        f"({'nothing measurable: held' if loops['held'] else 'measurable: not held'}). "
        f"The store held every turn of a set "
        f"{', '.join(f'{lag * 1000:.0f}' for lag in loops['keeper_lag_s'])} ms after its last "
        "answer.\n"
    )
    sat = results["saturated"]
    lines.append(
        f"{sat['loops']} agent loops of {sat['steps']} requests answered at once (no lull: "
        f"the cores busy), off and on in alternating rounds: on/off per round "
        f"{', '.join(f'{r:.3f}' for r in sat['paired'])}, median **{sat['ratio']:.3f}x** "
        f"(daemon CPU per call {sat['cpu_ms']['off']:.2f} ms off, {sat['cpu_ms']['on']:.2f} ms "
        f"on, of which the session writer {sat['writer_cpu_ms']['on']:.2f} ms); the store held "
        f"every turn of a set {', '.join(f'{lag * 1000:.0f}' for lag in sat['keeper_lag_s'])} "
        "ms after its last answer.\n"
    )
    faces = "; ".join(
        f"{face}: {f['threads']} threads (expected {results['expected'].get(face)}), "
        f"{f['turns'][0]}-{f['turns'][1]} turns, {f['messages'][0]}-{f['messages'][1]} "
        f"messages each, {f['forks']} forks"
        for face, f in sorted(kept["on"]["faces"].items())
    )
    lines.append(
        f"Kept, read from the stores: sessions on {kept['on']['threads']} threads, "
        f"{kept['on']['turns']} turns for {results['sent_on']} requests answered ({faces}); "
        f"sessions off {kept['off']['threads']} threads. "
        f"**{'Verified' if results['verified'] else 'NOT as expected'}.**"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run, a few calls each")
    args = parser.parse_args(argv or [])
    quick = {"conversations": 4, "steps": 6, "rounds": 2, "warmup": 1, "loops": 8,
             "loop_steps": 3, "loop_rounds": 2, "latency_ms": 100, "saturating": 8,
             "saturated_rounds": 2}  # fmt: skip
    results = asyncio.run(run(**(quick if args.quick else {})))
    print("## Model faces: agent sessions kept as threads, on and off\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
