"""What the reliability tests share: a daemon in a subprocess, a bystander client,
bounded waits, percentiles and the suite's scale.

The daemon runs as ``python -m exai.cli.main serve`` so that a crash is a dead
process, a SIGKILL is a real one, and its JSON log lines (stderr, captured to a
file) can be scanned afterwards. Its environment is built from scratch: nothing
``EXAI_*`` or credential-like leaks in from the developer's shell or ``.env``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families
from websockets.frames import Frame, Opcode

from exai.audit.events import COLUMNS
from exai.client import ExaiClient
from exai.emulators.ports import free_port as free_port
from exai.emulators.postgrest import PostgrestEmulator, Table
from exai.emulators.provider import EmulatorServer

__all__ = [
    "AUDIT_TABLE",
    "Bystander",
    "DaemonProcess",
    "client_frame",
    "free_port",
    "http_listening",
    "open_raw_websocket",
    "outbox_ids",
    "percentiles",
    "provider_env",
    "results_dir",
    "scale",
    "scaled",
    "supabase_env",
    "wait_until",
]

_CREDENTIAL_PREFIXES = (
    "EXAI_",
    "SUPABASE_",
    "KIMI_",
    "MOONSHOT_",
    "GLM_",
    "ZAI_",
    "ZHIPUAI_",
    "OPENAI_",
)


def scale() -> float:
    """``EXAI_RELIABILITY_SCALE``: 1 for the real run, e.g. 0.1 while developing."""
    return float(os.environ.get("EXAI_RELIABILITY_SCALE", "1") or 1)


def scaled(n: float, minimum: int = 1) -> int:
    return max(minimum, round(n * scale()))


def results_dir() -> Path:
    root = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("EXAI_RELIABILITY_RESULTS") or root / "build" / "reliability")


def listening(port: int, timeout_s: float = 0.5) -> bool:
    """Whether something accepts connections on ``port`` of the loopback address.

    A port :func:`free_port` gave is in the ephemeral range, so a connection to it
    while nothing listens can be the probe connected to itself (TCP simultaneous
    open, when the kernel picks that very port as the source). That is nobody
    listening, and while it lasts it holds the port the server is about to bind.
    """
    with socket.socket() as s:
        s.settimeout(timeout_s)
        if s.connect_ex(("127.0.0.1", port)) != 0:
            return False
        return bool(s.getsockname() != s.getpeername())


def http_listening(port: int, timeout_s: float = 30.0) -> None:
    """Wait for the daemon's HTTP listener (``EXAI_HTTP_PORT``), which starts after the
    WebSocket port that :meth:`DaemonProcess.start` waits for, to answer ``/health``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing answered /health on port {port}")
        time.sleep(0.05)


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]], timeout_s: float, what: str
) -> float:
    """Poll ``predicate`` until it holds; return the seconds it took. Fails after ``timeout_s``."""
    started = time.monotonic()
    while True:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not reached within {timeout_s:g}s")
        await asyncio.sleep(0.05)


def percentiles(samples_s: list[float]) -> dict[str, float]:
    """p50, p95, p99 and max, in milliseconds (nearest-rank)."""
    if not samples_s:
        return {"n": 0}
    ordered = sorted(samples_s)
    n = len(ordered)

    def pct(p: float) -> float:
        return round(ordered[min(n - 1, max(0, math.ceil(p * n) - 1))] * 1000, 2)

    return {
        "n": n,
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


class DaemonProcess:
    """``exai serve`` in a subprocess on a fixed loopback port; restartable on it."""

    def __init__(self, workdir: Path, **env: str) -> None:
        self.workdir = workdir
        (workdir / "project").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env: dict[str, str] = {
            "EXAI_WS_HOST": "127.0.0.1",
            "EXAI_WS_PORT": str(self.port),
            "EXAI_HTTP_PORT": "0",
            "EXAI_DATA_DIR": str(workdir / "data"),
            "EXAI_ALLOWED_ROOTS": str(workdir / "project"),
            "EXAI_LOG_FORMAT": "json",
            "EXAI_LOG_LEVEL": "info",
            "EXAI_AUDIT_ENABLED": "false",
            "EXAI_PROGRESS_INTERVAL_S": "60",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.logs: list[Path] = []

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def data_dir(self) -> Path:
        return Path(self.env["EXAI_DATA_DIR"])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout_s: float = 30.0) -> DaemonProcess:
        base = {k: v for k, v in os.environ.items() if not k.startswith(_CREDENTIAL_PREFIXES)}
        log_path = self.workdir / f"daemon-{self.starts}.log"
        self.logs.append(log_path)
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "exai.cli.main", "serve"],
                env={**base, **self.env},
                cwd=self.workdir,  # no stray .env is read from the developer's checkout
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while self.http("/health")[0] != 200:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"daemon exited with {self.process.returncode}:\n{log_path.read_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError("daemon did not answer /health")
            time.sleep(0.05)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int | None:
        """Signal the daemon and wait for it; return its exit code."""
        proc, self.process = self.process, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def kill(self) -> int | None:
        return self.stop(signal.SIGKILL)

    # --- observation ------------------------------------------------------------------

    @property
    def bearer(self) -> str | None:
        """A token this daemon accepts, for the HTTP routes that need one."""
        if self.env.get("EXAI_WS_TOKEN"):
            return self.env["EXAI_WS_TOKEN"]
        tokens = self.env.get("EXAI_WS_TOKENS", "")
        return tokens.split(",")[0].partition("=")[2] or None

    def http(self, path: str, token: str | None = "") -> tuple[int, str]:
        """GET ``path``, with the daemon's own token unless another (or None) is given."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        token = self.bearer if token == "" else token
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def metrics(self) -> dict[str, float]:
        """Unlabelled samples by name, labelled ones as ``name{k=v,...}``."""
        status, text = self.http("/metrics")
        assert status == 200, f"/metrics answered {status}"
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    async def ametrics(self) -> dict[str, float]:
        return await asyncio.to_thread(self.metrics)

    def rss_bytes(self) -> int:
        return int(psutil.Process(self.pid).memory_info().rss)

    def open_fds(self) -> int:
        return int(psutil.Process(self.pid).num_fds())

    def sockets_to(self, port: int) -> int:
        """Open TCP connections from the daemon to ``port`` (a provider's keep-alive pool)."""
        conns = psutil.Process(self.pid).net_connections(kind="tcp")
        return sum(1 for c in conns if c.raddr and c.raddr.port == port)

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.pid).cpu_times()
        return float(times.user + times.system)

    def threads(self) -> int:
        return int(psutil.Process(self.pid).num_threads())

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def log_records(self) -> list[dict[str, Any] | str]:
        """Every log line: a dict for the JSON ones, the raw text for anything else."""
        records: list[dict[str, Any] | str] = []
        for line in self.log_text().splitlines():
            if not line.strip():
                continue
            try:
                parsed = json.loads(line)
            except ValueError:
                records.append(line)
                continue
            records.append(parsed if isinstance(parsed, dict) else line)
        return records

    def log_problems(self) -> list[dict[str, Any] | str]:
        """Lines at error level or above, and lines not written by structlog (tracebacks,
        warnings from libraries): each is something an operator would have to look at."""
        return [
            r
            for r in self.log_records()
            if isinstance(r, str) or r.get("level") in ("error", "critical", "exception")
        ]


@dataclass
class BystanderReport:
    calls: int = 0
    failures: list[str] = field(default_factory=list)


class Bystander:
    """A well-behaved client calling ``echo`` in a loop on its own thread and event
    loop, checking every answer, while a test does something nasty elsewhere."""

    def __init__(self, url: str, token: str | None, pause_s: float = 0.005) -> None:
        self.url = url
        self.token = token
        self.pause_s = pause_s
        self.report = BystanderReport()
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="bystander", daemon=True)

    def start(self) -> Bystander:
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("the bystander could not connect")
        return self

    def stop(self) -> BystanderReport:
        self._stop.set()
        self._thread.join(60)
        return self.report

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        try:
            client = ExaiClient(self.url, self.token, client_name="bystander")
            await client.connect()
        except Exception as exc:
            self.report.failures.append(f"connect: {exc!r}")
            self._started.set()
            return
        self._started.set()
        try:
            while not self._stop.is_set():
                n = self.report.calls
                text = f"bystander-{n}-" + "\u00e9\u4e2d" * (n % 7)
                try:
                    res = await client.call("echo", {"text": text}, wait_s=30)
                except Exception as exc:
                    self.report.failures.append(f"call {n}: {exc!r}")
                    return
                self.report.calls += 1
                if res.error is not None:
                    self.report.failures.append(f"call {n}: {res.error.code}: {res.error.message}")
                elif [o.text for o in res.outputs] != [text]:
                    self.report.failures.append(f"call {n}: wrong answer {res.outputs!r}")
                await asyncio.sleep(self.pause_s)
        finally:
            await client.close()


async def open_raw_websocket(
    port: int, path: str = "/"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket opened by hand, for tests that must misbehave below any client
    library: write frames from :func:`client_frame`, stall, or abort the TCP stream."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    writer.write(request.encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    assert head.startswith(b"HTTP/1.1 101"), head[:200]
    return reader, writer


def client_frame(data: str | bytes, opcode: Opcode | None = None) -> bytes:
    """One masked client frame, as bytes on the wire."""
    if opcode is None:
        opcode = Opcode.TEXT if isinstance(data, str) else Opcode.BINARY
    payload = data.encode() if isinstance(data, str) else data
    return Frame(opcode, payload).serialize(mask=True)


# --- fixtures' settings -----------------------------------------------------------------

AUDIT_TABLE = Table(
    columns=(*COLUMNS, "data", "received_at"),
    key=("event_id",),
    required=frozenset({"event_id", "kind", "ts", "instance_id"}),
)


def provider_env(
    emulator: EmulatorServer,
    kimi_key: str = "sk-reliability-kimi-0000",
    glm_key: str = "reliability-glm-key-0000",
) -> dict[str, str]:
    """Daemon settings that send Kimi and GLM traffic to the emulator."""
    return {
        "KIMI_API_KEY": kimi_key,
        "KIMI_BASE_URL": emulator.base_url_kimi,
        "GLM_API_KEY": glm_key,
        "GLM_BASE_URL": emulator.base_url_glm,
        "EXAI_PROVIDER_MAX_RETRIES": "0",
    }


def supabase_env(postgrest: PostgrestEmulator, key: str) -> dict[str, str]:
    """Daemon settings that ship the audit trail to the PostgREST fixture, quickly."""
    return {
        "EXAI_AUDIT_ENABLED": "true",
        "EXAI_AUDIT_SINK": "supabase",
        "SUPABASE_URL": postgrest.url,
        "SUPABASE_SERVICE_ROLE_KEY": key,
        "EXAI_AUDIT_FLUSH_INTERVAL_S": "0.02",
        "EXAI_AUDIT_SHIP_INTERVAL_S": "0.05",
    }


def outbox_ids(path: Path, table: str) -> set[str]:
    """Event ids in one table of an audit outbox file (``outbox`` or ``archive``)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute(f"SELECT event_id FROM {table}")}
    finally:
        db.close()
