"""HAProxy in front of test daemons (a test and benchmark fixture, not for production).

``TempHaproxy`` runs the real ``haproxy`` binary in the foreground with the
configuration that ships in ``deploy/haproxy.cfg`` (the one docs/deploy.md
describes), unchanged: the addresses it reads from the environment are set to
an ephemeral loopback port and the daemons' ports. HAProxy is a Debian package;
:func:`ensure_haproxy` installs it with apt-get when it is missing and this
process may, as the test setup does for the real IDE clients from npm.

    with TempHaproxy([port1, port2], http_ports=[http1, http2]) as lb:
        url = lb.url             # ws://127.0.0.1:<port>
        http_url = lb.http_url   # http://127.0.0.1:<port>: /mcp, /v1, /console
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from exai.emulators.ports import free_port
from exai.subprocesses import child_environment

__all__ = ["CONFIG", "TempHaproxy", "ensure_haproxy"]

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"
_SERVERS = 3  # the server lines in deploy/haproxy.cfg


def ensure_haproxy() -> str:
    """The path of ``haproxy``, installed from the distribution's packages if missing."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        raise RuntimeError("haproxy is not installed and there is no apt-get to install it")
    env = {**child_environment(), "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run([apt, "install", "-y", "-q", "haproxy"], capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip
    found = shutil.which("haproxy", path="/usr/sbin:/usr/bin:/sbin")
    if done.returncode != 0 or not found:
        raise RuntimeError(f"apt-get install haproxy failed:\n{done.stderr[-2000:]}")
    return found


class TempHaproxy:
    """``haproxy -f deploy/haproxy.cfg`` on two loopback ports (WebSocket, HTTP), for up
    to three daemons."""

    def __init__(
        self,
        daemon_ports: Sequence[int],
        config: Path = CONFIG,
        *,
        http_ports: Sequence[int] = (),
    ) -> None:
        if not 1 <= len(daemon_ports) <= _SERVERS or len(http_ports) > _SERVERS:
            raise ValueError(f"the configuration has {_SERVERS} servers per backend")
        self.config = config
        self.daemon_ports = list(daemon_ports)
        self.http_ports = list(http_ports)
        self.port = free_port()
        self.http_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def environment(self) -> dict[str, str]:
        # A server without a daemon points at a port nobody listens on: marked down.
        ports = self.daemon_ports + [free_port() for _ in range(_SERVERS - len(self.daemon_ports))]
        http = self.http_ports + [free_port() for _ in range(_SERVERS - len(self.http_ports))]
        env = {"EXAI_LB_BIND": f"127.0.0.1:{self.port}",
               "EXAI_LB_HTTP_BIND": f"127.0.0.1:{self.http_port}"}  # fmt: skip
        env.update({f"EXAI_DAEMON_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(ports)})
        env.update({f"EXAI_HTTP_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(http)})
        return env

    def start(self, timeout_s: float = 10.0) -> TempHaproxy:
        binary = ensure_haproxy()
        env = {**child_environment(), **self.environment()}
        check = subprocess.run([binary, "-c", "-q", "-f", str(self.config)], env=env,
                               capture_output=True, text=True, check=False)  # fmt: skip
        if check.returncode != 0:
            raise RuntimeError(f"haproxy rejects {self.config}:\n{check.stderr}")
        # -db: stay in the foreground, so this object owns the process.
        # Its messages (servers going up and down) go to a file: a pipe nobody
        # reads would fill and stall it.
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([binary, "-db", "-f", str(self.config)], env=env,
                                        stdout=self._log, stderr=self._log)  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.process.poll() is not None:
                    err = self.log_text()
                    raise RuntimeError(
                        f"haproxy exited with {self.process.returncode}: {err}"
                    ) from None
                if time.monotonic() > deadline:
                    raise TimeoutError("haproxy did not start listening") from None
                time.sleep(0.05)

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def log_text(self) -> str:
        """What haproxy has written (servers marked up and down, warnings)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def __enter__(self) -> TempHaproxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
