"""Start the daemon for the shim when none is listening (``EXAI_SHIM_AUTOSTART``).

IDEs often launch several shims at once (one per window or agent). They race
to the same port, so the start is serialised by an exclusive ``flock`` on a file
under the data directory: the first shim starts the daemon and waits for it to
listen, the others wait for the lock, see the port open and start nothing.
The daemon runs in its own session (``start_new_session``), so it outlives the
shim and the IDE's process group, and writes its logs to ``daemon.log`` in the
data directory, never to the shim's stdout, which belongs to MCP. It gets exai's
settings from the shim's environment and nothing else of it
(:func:`~exai.subprocesses.daemon_environment`): whatever the IDE put there for
its own tools stays with the shim.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from exai.logs import get_logger
from exai.subprocesses import daemon_environment

__all__ = ["AutostartError", "daemon_command", "ensure_daemon", "is_listening"]

log = get_logger("exai.shim")

LOCK_NAME = "daemon-autostart.lock"
LOG_NAME = "daemon.log"
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class AutostartError(Exception):
    """The daemon could not be started; the message says why and where its log is."""


def daemon_command(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "exai.cli.main", "serve", "--host", host, "--port", str(port)]


async def is_listening(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something answers HTTP on ``host:port``; asks ``/health`` so a bare
    TCP probe does not show up in the daemon's log as a failed handshake."""
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\n"
                             "Connection: close\r\n\r\n".encode())  # fmt: skip
                await writer.drain()
                status = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    return status.startswith(b"HTTP/")


async def ensure_daemon(
    data_dir: Path,
    host: str,
    port: int,
    *,
    timeout_s: float = 20.0,
    env: dict[str, str] | None = None,
    started_by: str = "exai shim",
) -> int | None:
    """Start a daemon on ``host:port`` unless one listens; return its pid if this call started it.

    Only loopback addresses are started: a daemon elsewhere is not ours to run.
    ``started_by`` names the starter in ``daemon.log``, which the shim and ``exai
    serve --detach`` share, so a start there can be traced to who asked for it.
    """
    if await is_listening(host, port):
        return None
    if host not in _LOOPBACK:
        raise AutostartError(f"no daemon at {host}:{port}, and autostart only runs local daemons")
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    async with _exclusive(data_dir / LOCK_NAME, timeout_s):
        if await is_listening(host, port):
            return None  # another shim started it while we waited for the lock
        return await _start(data_dir / LOG_NAME, host, port, timeout_s, env, started_by)


@contextlib.asynccontextmanager
async def _exclusive(path: Path, timeout_s: float) -> AsyncIterator[None]:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AutostartError(f"timed out waiting for {path}") from None
                await asyncio.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


async def _start(
    log_path: Path,
    host: str,
    port: int,
    timeout_s: float,
    env: dict[str, str] | None,
    started_by: str,
) -> int:
    process = await asyncio.to_thread(_spawn, log_path, host, port, env, started_by)
    log.info("daemon started", pid=process.pid, log=str(log_path))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await is_listening(host, port, timeout_s=0.5):
            return process.pid
        if process.poll() is not None:
            raise AutostartError(
                f"the daemon exited with code {process.returncode} on start; see {log_path}"
            )
        await asyncio.sleep(0.1)
    raise AutostartError(f"the daemon did not listen on {host}:{port} within {timeout_s:g}s; "
                         f"see {log_path}")  # fmt: skip


def _spawn(
    log_path: Path, host: str, port: int, env: dict[str, str] | None, started_by: str
) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as out:
        out.write(f"--- {started_by} (pid {os.getpid()}): starting the daemon on "
                  f"{host}:{port}\n".encode())  # fmt: skip
        out.flush()
        process = subprocess.Popen(
            daemon_command(host, port),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=daemon_environment(env),
        )
        out.write(f"--- daemon pid {process.pid}\n".encode())
    return process
