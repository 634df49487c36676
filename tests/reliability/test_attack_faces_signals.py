"""What the daemon tells its operators while under attack: traces and readiness.

* **Traces without content**: a real ``exai serve`` exports its spans over
  OTLP/HTTP to a collector stand-in on loopback (it keeps every request's bytes),
  with ``EXAI_TRACE_CONTENT`` off. Every prompt carries a canary; the provider
  emulator is scripted to fail in many ways (both vendors' error bodies, with
  status 400, 401, 403, 404, 422, 429, 500, 502 and 503, a canary in the message
  and in the fields beside it, the vendor's ``code`` and ``type`` included, a
  stream cut off, Z.ai's ``sensitive`` finish) and to quote the whole prompt in
  its error message; some calls succeed, with replies that quote it too, and some
  are refused by exai itself for an argument that holds the prompt. The calls
  come over the WebSocket protocol (``chat`` and ``completion``),
  ``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` (whole and
  streamed) and ``/mcp``. Asserted: no canary in any exported span, nor in the
  daemon's log, while the spans are there (an error span for every failure). A
  control run with content on finds the canaries on its spans, so the scan can
  see them.
* **Readiness under audit loss**: an in-process daemon whose audit sink (the
  PostgREST stand-in) goes down in turn three ways, over and over, and across
  restarts; see :func:`test_readiness_follows_audit_loss`.
"""

from __future__ import annotations

import asyncio
import gzip
import random
import secrets
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from exai.audit.readiness import DROPPING_WINDOW_S
from exai.client import ExaiClient
from exai.emulators.postgrest import PostgrestEmulator
from tests.conftest import make_settings, running_daemon
from tests.reliability.conftest import SUPABASE_KEY
from tests.reliability.harness import (
    DaemonProcess,
    free_port,
    http_listening,
    provider_env,
    scaled,
    wait_until,
)

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

TRACE_SECTION = "attack_faces_traces"
READY_SECTION = "attack_faces_readiness"
TOKEN = "traces-attack-token-5c1e07"


class Collector:
    """An OTLP/HTTP collector stand-in on loopback: keeps what each export carried."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    data = gzip.decompress(data)
                collector.bodies.append(data)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Collector:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Any]:
        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out.extend(scope.spans)
        return out


def _quoting(vendor: str, status: int, prompt: str, **more: Any) -> dict[str, Any]:
    """A scripted vendor error whose message quotes the whole prompt."""
    said = f"Invalid request: the message '{prompt}' breaks the rules"
    inner = ({"message": said, "type": "invalid_request_error"} if vendor == "kimi"
             else {"code": "1214", "message": said})  # fmt: skip
    return {"vendor": vendor, "status": status, "body": {"error": {**inner, **more}}}


# kind: the model, and the emulator's script for the prompt (None: no script)
FAILURES: dict[str, tuple[str, Any]] = {
    **{f"kimi_{s}": ("kimi-k2.6", lambda p, s=s: _quoting("kimi", s, p))
       for s in (400, 401, 403, 404, 422, 429, 500, 502, 503)},
    **{f"glm_{s}": ("glm-4.6", lambda p, s=s: _quoting("glm", s, p))
       for s in (400, 429, 500)},
    "kimi_quoted_beside": ("kimi-k2.6", lambda p: _quoting(
        "kimi", 400, p, param=p, details={"prompt": p, "messages": [p]})),
    "glm_sensitive": ("glm-4.6", lambda p: {"vendor": "glm", "finish_reason": "sensitive",
                                            "text": f"you said {p}"}),
    "stream_cut": ("kimi-k2.6", lambda p: {"vendor": "kimi", "text": f"echo {p} " * 20,
                                           "fail_after_chunks": 2}),
    "answered": ("kimi-k2.6", lambda p: {"vendor": "kimi", "text": f"you said {p}",
                                         "reasoning": f"they said {p}"}),
    "kimi_code_quotes": ("kimi-k2.6", lambda p: _quoting("kimi", 400, p, code=p[:40])),
    "kimi_type_quotes": ("kimi-k2.6", lambda p: {"vendor": "kimi", "status": 400, "body": {
        "error": {"message": "refused", "type": p[:40]}}}),
    "glm_code_quotes": ("glm-4.6", lambda p: _quoting("glm", 400, p, code=p[:40])),
    "refused_by_exai": ("glm-4.6", None),  # the prompt as a temperature: never sent
}  # fmt: skip
FACES = ["ws_chat", "ws_completion", "chat", "chat_stream", "messages", "messages_stream",
         "responses", "responses_stream", "mcp"]  # fmt: skip


async def _call(face: str, model: str, prompt: str, extra: dict[str, Any], ws: ExaiClient,
                http: httpx.AsyncClient) -> str:  # fmt: skip
    """One call with ``prompt`` (and ``extra`` arguments) on ``face``; how it ended, as
    the caller saw it."""
    ask = [{"role": "user", "content": prompt}]
    if face.startswith("ws_"):
        tool = face[3:]
        arguments = ({"prompt": prompt, "model": model} if tool == "chat"
                     else {"messages": ask, "model": model})  # fmt: skip
        result = await ws.call(tool, {**arguments, **extra})
        return "ok" if result.error is None else result.error.code.value
    stream = face.endswith("_stream")
    if face.startswith("chat"):
        path, body = "/v1/chat/completions", {"model": model, "messages": ask, "stream": stream}
    elif face.startswith("messages"):
        path, body = "/v1/messages", {"model": model, "messages": ask, "max_tokens": 256,
                                      "stream": stream}  # fmt: skip
    elif face.startswith("responses"):
        path, body = "/v1/responses", {"model": model, "input": prompt, "store": False,
                                       "stream": stream}  # fmt: skip
    else:
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
        path = "/mcp"
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "chat",
                "arguments": {"prompt": prompt, "model": model, **extra},
                "_meta": meta,
            },
        }
        headers = {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "chat",
            "Accept": "application/json, text/event-stream",
        }
        answer = await http.post(path, json=body, headers=headers)
        result = answer.json().get("result") or {}
        return "error" if result.get("isError") else str(answer.status_code)
    answer = await http.post(path, json={**body, **extra})
    if stream and answer.status_code == 200:
        return "error_event" if '"error"' in answer.text else "200"
    return str(answer.status_code)


class TraceRun:
    """Calls through one daemon exporting to a collector stand-in; what came of them."""

    def __init__(self) -> None:
        self.canaries: list[str] = []
        self.answers: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.as_planned = 0  # calls that reached the provider, or did not, as planned
        self.bodies: list[bytes] = []
        self.spans: list[Any] = []
        self.log = ""
        self.log_lines = 0

    def leaked(self) -> tuple[list[str], list[str]]:
        """The canaries found in the exported spans, and in the daemon's log."""
        raw = b"".join(self.bodies)
        return ([c for c in self.canaries if c.encode() in raw],
                [c for c in self.canaries if c in self.log])  # fmt: skip


async def _trace_run(workdir: Path, emulator: Any, tries: int, content: bool,
                     rng: random.Random) -> TraceRun:  # fmt: skip
    run = TraceRun()
    kinds = list(FAILURES)
    with Collector() as collector:
        env = {**provider_env(emulator), "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
               "OTEL_TRACES_SAMPLER": "always_on", "OTEL_BSP_SCHEDULE_DELAY": "100",
               "EXAI_TRACE_CONTENT": str(content).lower(), "EXAI_HTTP_PORT": str(free_port()),
               "EXAI_WS_TOKEN": TOKEN, "EXAI_STREAM_MIN_CHUNK_CHARS": "1",
               "EXAI_RATE_LIMIT_PER_MIN": "0"}  # fmt: skip
        daemon = DaemonProcess(workdir, **env).start()
        try:
            port = int(daemon.env["EXAI_HTTP_PORT"])
            http_listening(port)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                ExaiClient(daemon.url, TOKEN) as ws,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers,
                                  timeout=60) as http,
            ):  # fmt: skip
                for n in range(tries):
                    kind, face = kinds[n % len(kinds)], rng.choice(FACES)
                    if kind == "stream_cut" and not face.endswith("_stream"):
                        face = rng.choice([f for f in FACES if f.endswith("_stream")])
                    canary = f"CANARY{n:04d}{secrets.token_hex(6)}"
                    run.canaries.append(canary)
                    model, script = FAILURES[kind]
                    prompt = f"please keep {canary} between us"
                    emulator.reset()  # a script a call left unused goes with it
                    if script is not None:
                        emulator.script(script(prompt))
                    extra = {"temperature": prompt} if script is None else {}
                    run.answers[await _call(face, model, prompt, extra, ws, http)] += 1
                    run.kinds[kind] += 1
                    run.as_planned += len(emulator.requests) == (script is not None)
        finally:
            daemon.stop()  # flushes the spans still queued
        run.bodies = list(collector.bodies)
    run.spans = collector.spans()
    run.log = daemon.log_text()
    run.log_lines = len(daemon.log_records())
    return run


async def test_no_prompt_reaches_a_span_or_the_log_when_calls_fail(tmp_path: Path, emulator,
                                                                   figures):  # fmt: skip
    rng = random.Random(20261130)
    tries = scaled(380, minimum=len(FAILURES) * 2)
    run = await _trace_run(tmp_path / "off", emulator, tries, False, rng)
    in_spans, in_log = run.leaked()
    errors = [s for s in run.spans if s.status.code == 2]  # STATUS_CODE_ERROR
    failing = tries - run.kinds["answered"]
    # The control: with content on, the same scan finds the prompts on the spans.
    control = await _trace_run(tmp_path / "on", emulator, len(FAILURES), True, rng)
    control_found = len(control.leaked()[0])
    figures.record(TRACE_SECTION, calls=tries, faces=FACES, kinds=dict(run.kinds),
                   calls_as_planned=run.as_planned, answers=dict(sorted(run.answers.items())),
                   exports=len(run.bodies), spans_exported=len(run.spans),
                   error_spans=len(errors), canaries_in_spans=len(in_spans),
                   canaries_in_log=len(in_log), log_lines=run.log_lines,
                   control_calls_with_content_on=len(control.canaries),
                   control_canaries_found_in_spans=control_found)  # fmt: skip
    assert in_spans == [] and in_log == [], (in_spans[:5], in_log[:5])
    assert run.as_planned == tries and len(errors) >= failing, (run.as_planned, failing)
    assert control_found > len(control.canaries) // 2


# --- readiness under audit loss ---------------------------------------------------------

LIMIT = 200  # EXAI_AUDIT_MAX_OUTBOX_EVENTS of these daemons
OUTAGES = ["refused", "failing", "hanging"]  # how the sink is down, in turn


class ShiftedClock:
    """The audit trail's monotonic clock, which the test moves on past the window."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def _sink_down(postgrest: PostgrestEmulator, how: str) -> None:
    if how == "refused":
        postgrest.refuse()
    elif how == "failing":
        postgrest.fail(503)
    else:
        postgrest.hang()


async def _ready(daemon: Any) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(f"http://127.0.0.1:{daemon.port}/ready",
                                headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
    return answer.status_code, answer.json()["checks"]["audit"]


async def _drops(daemon: Any, client: ExaiClient, tally: Counter[str], enough: int,
                 ready: dict[str, Counter[int]] | None = None) -> None:  # fmt: skip
    """Echo calls, 20 at a time, until the trail has dropped ``enough`` more events,
    reading /ready after each batch: ``filling`` while the outbox was well below its
    limit, ``while_dropping`` once an event was dropped."""
    audit = daemon.services.audit
    start = audit.stats()["dropped"]
    while audit.stats()["dropped"] < start + enough:
        results = await asyncio.gather(*(client.call("echo", {"text": f"e{i}"})
                                         for i in range(20)))  # fmt: skip
        tally["echo_calls"] += len(results)
        tally.update(f"echo_failed_{r.error.code.value}" for r in results if r.error)
        stats = audit.stats()
        if ready is not None and stats["dropped"] > start:
            ready["while_dropping"][(await _ready(daemon))[0]] += 1
        elif ready is not None and stats["backlog"] + stats["quarantined"] < LIMIT - 60:
            ready["filling"][(await _ready(daemon))[0]] += 1
        assert tally["echo_calls"] < 100 * LIMIT, "the outbox never filled"


def _accounted(stats: dict[str, Any]) -> int:
    """Every event the trail has taken: shipped, waiting, quarantined or dropped."""
    return sum(int(stats[k]) for k in ("shipped", "backlog", "quarantined", "dropped"))


def _audit_settings(workdir: Path, postgrest: PostgrestEmulator) -> Any:
    return make_settings(workdir, ws_tokens=f"alice={TOKEN}", audit_enabled=True,
                         audit_sink="supabase", supabase_url=postgrest.url,
                         supabase_service_role_key=SUPABASE_KEY,
                         audit_max_outbox_events=LIMIT, audit_flush_interval_s=0.02,
                         audit_ship_interval_s=0.05, rate_limit_per_min=0)  # fmt: skip


async def test_readiness_follows_audit_loss(tmp_path: Path, postgrest, figures):
    """A sink down long enough to fill the outbox to ``EXAI_AUDIT_MAX_OUTBOX_EVENTS``
    (refusing connections, answering 503, or hanging, in turn), under echo calls:
    /ready is 503 from the first event dropped, stays 503 once the sink is back and
    the backlog has drained until the 60 s window has passed (the trail's clock is
    moved on), then 200; the calls never fail. Then the same across restarts: a
    daemon started on an outbox at the limit is 503 until it drains, and one started
    on a drained outbox is 200. Every event was delivered or counted as dropped:
    while cycling, the events emitted equal those shipped, waiting or dropped, and at
    the end the backlog is empty and the sink holds as many distinct events as the
    outbox counts shipped."""
    settings = _audit_settings(tmp_path, postgrest)
    cycles = scaled(6, minimum=3)
    tally: Counter[str] = Counter()
    ready: dict[str, Counter[int]] = {"cycle_start": Counter(), "filling": Counter(),
                                      "while_dropping": Counter(),
                                      "drained_in_window": Counter(),
                                      "after_window": Counter()}  # fmt: skip
    clock = ShiftedClock()
    async with running_daemon(settings) as daemon:
        audit = daemon.services.audit
        audit.clock = clock
        emit, emitted = audit.emit, Counter[str]()

        def counted(kind: str, /, **fields: Any) -> None:
            emitted[kind] += 1
            emit(kind, **fields)

        audit.emit = counted  # every event from here on is counted
        before = _accounted(audit.stats())
        async with ExaiClient(daemon.url, TOKEN) as client:
            for cycle in range(cycles):
                ready["cycle_start"][(await _ready(daemon))[0]] += 1
                how = OUTAGES[cycle % len(OUTAGES)]
                _sink_down(postgrest, how)
                await _drops(daemon, client, tally, 200, ready)
                postgrest.healthy()
                await wait_until(lambda: audit.stats()["backlog"] == 0, 120, "backlog drained")
                ready["drained_in_window"][(await _ready(daemon))[0]] += 1
                clock.offset += DROPPING_WINDOW_S
                ready["after_window"][(await _ready(daemon))[0]] += 1
                tally[f"cycles_sink_{how}"] += 1
        # The client's leaving is an event too; once it is in, the sums must meet.
        await wait_until(lambda: emitted["connection_closed"] == 1, 10, "the client gone")
        await wait_until(lambda: _accounted(audit.stats()) - before == sum(emitted.values()),
                         10, "every event emitted shipped, waiting or dropped")  # fmt: skip
        accounted = _accounted(audit.stats()) - before
    restarts: dict[str, Any] = {}
    _sink_down(postgrest, "refused")
    async with running_daemon(settings) as daemon, ExaiClient(daemon.url, TOKEN) as client:
        await _drops(daemon, client, tally, 20)
    async with running_daemon(settings) as daemon:  # on an outbox at the limit
        daemon.services.audit.clock = clock
        status, check = await _ready(daemon)
        restarts["at_the_limit"] = f"{status}, backlog {check['backlog']}"
        assert status == 503 and check["backlog"] >= LIMIT, check
        postgrest.healthy()
        await wait_until(lambda: daemon.services.audit.stats()["backlog"] == 0, 120, "drained")
        status, check = await _ready(daemon)
        restarts["drained"] = status
        assert status == 200, check
    async with running_daemon(settings) as daemon:  # on a drained outbox
        status, check = await _ready(daemon)
        restarts["started_drained"] = status
        stats = daemon.services.audit.stats()
    delivered = {row["event_id"] for row in postgrest.rows("audit_events")}
    written = [row["event_id"] for write in postgrest.writes("audit_events")
               if 200 <= write.status < 300 for row in write.rows]  # fmt: skip
    figures.record(READY_SECTION, cycles=cycles, limit=LIMIT, **tally,
                   ready={k: dict(sorted(v.items())) for k, v in ready.items()},
                   restarts=restarts, events_emitted_while_cycling=dict(emitted),
                   events_accounted_for_while_cycling=accounted,
                   events_delivered=len(delivered),
                   events_dropped=stats["dropped"], events_shipped=stats["shipped"],
                   events_written_again=len(written) - len(set(written)))  # fmt: skip
    assert not [k for k in tally if k.startswith("echo_failed")], tally
    assert ready["cycle_start"] == {200: cycles} and ready["after_window"] == {200: cycles}
    assert set(ready["while_dropping"]) == {503} and ready["drained_in_window"] == {503: cycles}
    assert set(ready["filling"]) == {200}
    assert status == 200 and stats["backlog"] == 0 and stats["quarantined"] == 0
    assert len(delivered) == stats["shipped"]
    assert accounted == sum(emitted.values()), (accounted, emitted)  # none lost unseen
