"""``make trace-demo``: a ``consensus`` call as one trace in Arize Phoenix.

Phoenix is a tracing backend nobody here wrote: it takes OTLP over HTTP and
answers queries through its REST API. It is heavy, so it lives in a virtual
environment of its own that this script creates (``build/phoenix/venv``, never
the project's dependencies), and runs as a subprocess with its UI and OTLP/HTTP
on loopback (``PHOENIX_HOST=127.0.0.1``; ``phoenix serve`` alone listens on
0.0.0.0). Its OTLP/gRPC receiver binds every interface whatever
``PHOENIX_HOST`` says (Phoenix 20's ``grpc_server.py``), so it gets a free
port of its own. The script:

1. starts Phoenix, the provider emulator (a test fixture standing in for
   Moonshot and Z.ai) and ``exai serve`` with ``OTEL_EXPORTER_OTLP_ENDPOINT``
   pointing at Phoenix;
2. makes one ``consensus`` call over WebSocket (two models, then a synthesis),
   sending a ``traceparent`` as a calling agent would;
3. stops the daemon (which exports what it has queued), then asks Phoenix for
   the spans of the trace the result's ``metadata.trace_id`` names, and checks
   that they are one trace under the caller's span, with a span per model and
   one for the synthesis;
4. prints the link to the trace in Phoenix's UI, ``/redirects/traces/<trace id>``
   (Phoenix looks the trace's project up and redirects to its page);
5. with ``--screenshot PATH``, photographs Phoenix's page of that trace with
   headless Chromium (``/usr/bin/chromium``; ``apt-get install -y chromium``);
6. with ``--keep``, leaves Phoenix running for browsing until Ctrl-C
   (``--port`` fixes its port, 6006 for the usual address).

Exits 0 when every check holds, 1 otherwise; prints what Phoenix returned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from exai.client import ExaiClient
from exai.emulators.provider import EmulatorServer
from scripts.bench.common import daemon_process, free_port

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
PHOENIX = ROOT / "build" / "phoenix"
PHOENIX_REQUIREMENT = "arize-phoenix>=20,<21"
MODELS = [{"model": "kimi-k2.6", "stance": "for"}, {"model": "glm-5.1", "stance": "against"}]


def ensure_phoenix() -> Path:
    """Phoenix's own virtual environment, created on first use; its ``phoenix`` command."""
    command = PHOENIX / "venv" / "bin" / "phoenix"
    if not command.exists():
        print(f"installing {PHOENIX_REQUIREMENT} into {PHOENIX / 'venv'} (once)...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PHOENIX / "venv")], check=True)
        pip = [str(PHOENIX / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, PHOENIX_REQUIREMENT], check=True)
    return command


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:  # loopback only
        return json.loads(answer.read())


def _wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answered at {url} within {timeout_s:.0f}s") from None
            time.sleep(0.5)


def start_phoenix(command: Path, port: int, workdir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": str(workdir),
           "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    log = open(workdir / "phoenix.log", "wb")
    return subprocess.Popen([str(command), "serve"], env=env, stdout=log, stderr=log)


def trace_spans(base: str, trace_id: str, want: int, timeout_s: float = 60.0) -> list[dict]:
    """The spans Phoenix holds for ``trace_id``, once it has at least ``want`` of them."""
    url = f"{base}/v1/projects/default/spans/otlpv1?trace_id={trace_id}&limit=1000"
    deadline = time.monotonic() + timeout_s
    spans: list[dict] = []
    while time.monotonic() < deadline:
        try:
            spans = _get(url).get("data", [])
        except OSError:
            spans = []
        if len(spans) >= want:
            return spans
        time.sleep(1.0)
    return spans


def check(spans: list[dict], trace_id: str, parent_span: str) -> list[str]:
    """What is wrong with the trace (nothing: an empty list)."""
    problems = []
    names = [s["name"] for s in spans]
    if {s.get("trace_id") for s in spans} != {trace_id}:
        problems.append(f"spans of other traces: {sorted({s.get('trace_id') for s in spans})}")
    roots = [s for s in spans if s.get("parent_span_id") == parent_span]
    if [r["name"] for r in roots] != ["call_tool consensus"]:
        problems.append(f"the caller's span should have one child, call_tool consensus: {roots}")
    for model in ("kimi-k2.6", "glm-5.1"):
        if f"opinion {model}" not in names or f"chat {model}" not in names:
            problems.append(f"no opinion span and model span for {model}")
    if names.count("synthesis") != 1:
        problems.append("no synthesis span")
    by_id = {s["span_id"]: s for s in spans}
    for s in spans:
        parent = s.get("parent_span_id")
        if parent not in by_id and parent != parent_span:
            problems.append(f"{s['name']} has a parent outside the trace")
    return problems


def screenshot(url: str, path: Path) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="exai-chromium-") as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--hide-scrollbars",
                        "--virtual-time-budget=15000", "--window-size=1600,1000",
                        f"--screenshot={path}", url],
                       check=True, timeout=120, capture_output=True)  # fmt: skip


def trace_link(base: str, trace_id: str) -> str:
    """The page of one trace in Phoenix's UI, whatever project holds it."""
    return f"{base}/redirects/traces/{trace_id}"


async def keep_running(phoenix: subprocess.Popen[bytes], base: str) -> None:
    print(f"Phoenix keeps running at {base}; Ctrl-C stops it", flush=True)
    await asyncio.to_thread(phoenix.wait)  # a Ctrl-C ends it: run() terminates Phoenix
    print(f"Phoenix exited with code {phoenix.returncode}")


async def run(screenshot_to: Path | None, keep: bool = False, port: int | None = None) -> int:
    command = ensure_phoenix()
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    workdir = Path(tempfile.mkdtemp(prefix="exai-phoenix-"))
    phoenix = start_phoenix(command, port, workdir)
    emulator = EmulatorServer().start()
    try:
        _wait_http(f"{base}/healthz", timeout_s=180)
        caller_trace, caller_span = secrets.token_hex(16), secrets.token_hex(8)
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_SERVICE_NAME": "exai-trace-demo",
               "OTEL_BSP_SCHEDULE_DELAY": "200", "KIMI_API_KEY": "sk-demo-kimi",
               "KIMI_BASE_URL": emulator.base_url_kimi, "GLM_API_KEY": "demo-glm",
               "GLM_BASE_URL": emulator.base_url_glm}  # fmt: skip
        async with daemon_process(**env) as (url, _pid):
            async with ExaiClient(url) as client:
                result = await client.call(
                    "consensus",
                    {"prompt": "Should the audit outbox move from SQLite to Postgres?",
                     "models": MODELS},
                    trace={"traceparent": f"00-{caller_trace}-{caller_span}-01"},
                )  # fmt: skip
        if result.error is not None:
            print(f"consensus failed: {result.error.code.value}: {result.error.message}")
            return 1
        trace_id = (result.metadata.model_extra or {}).get("trace_id")
        print(f"consensus answered; metadata.trace_id = {trace_id}")
        if trace_id != caller_trace:
            print(f"the result names trace {trace_id}, not the caller's {caller_trace}")
            return 1
        spans = trace_spans(base, trace_id, want=12)
        for s in sorted(spans, key=lambda s: s.get("start_time_unix_nano") or 0):
            print(f"  {s['name']:<32} span {s['span_id']}  parent {s.get('parent_span_id')}")
        problems = check(spans, trace_id, caller_span)
        for problem in problems:
            print(f"FAILED: {problem}")
        if not problems:
            print(f"Phoenix holds one trace of {len(spans)} spans: the call, one span per model "
                  "and the synthesis")  # fmt: skip
        print(f"the trace in Phoenix: {trace_link(base, trace_id)}")
        if screenshot_to is not None and not problems:
            project = next(p for p in _get(f"{base}/v1/projects")["data"]
                           if p["name"] == "default")  # fmt: skip
            page = f"{base}/projects/{project['id']}/traces/{trace_id}"
            screenshot(page, screenshot_to)
            print(f"screenshot of {page} written to {screenshot_to}")
        if keep:
            await keep_running(phoenix, base)
        return 1 if problems else 0
    finally:
        emulator.stop()
        phoenix.terminate()
        try:
            phoenix.wait(timeout=30)
        except subprocess.TimeoutExpired:
            phoenix.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", type=Path, help="write a PNG of Phoenix's trace page")
    parser.add_argument("--keep", action="store_true",
                        help="leave Phoenix running after the checks, until Ctrl-C")  # fmt: skip
    parser.add_argument("--port", type=int, help="Phoenix's port (default: a free one)")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run(args.screenshot, keep=args.keep, port=args.port))
    except KeyboardInterrupt:  # --keep's way out; Phoenix was stopped on the way
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
