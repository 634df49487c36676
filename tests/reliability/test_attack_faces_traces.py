"""What the daemon's traces carry while calls fail: never the prompt, with content off.

A real ``exai serve`` exports its spans over OTLP/HTTP to a collector stand-in on
loopback (it keeps every request's bytes), with ``EXAI_TRACE_CONTENT`` off. Every
prompt carries a canary; the provider emulator is scripted to fail in many ways
(both vendors' error bodies, with status 400, 401, 403, 404, 422, 429, 500, 502 and
503, a canary in the message and in the fields beside it, the vendor's ``code`` and
``type`` included, a stream cut off, Z.ai's ``sensitive`` finish) and to quote the
whole prompt in its error message; some calls succeed, with replies that quote it
too, and some are refused by exai itself for an argument that holds the prompt.
The calls come over the WebSocket protocol (``chat`` and ``completion``),
``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` (whole and
streamed) and ``/mcp``. Asserted: no canary in any exported span, nor in the
daemon's log, while the spans are there (an error span for every failure). A
control run with content on finds the canaries on its spans, so the scan can see
them.
"""

from __future__ import annotations

import gzip
import random
import secrets
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from exai.client import ExaiClient
from tests.reliability.harness import DaemonProcess, free_port, http_listening, provider_env, scaled

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

TRACE_SECTION = "attack_faces_traces"
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
