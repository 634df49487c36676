"""The throwaway Postgres of the tests (:mod:`exai.emulators.postgres`) does not outlive
the process that started it: its watchdog stops it when that process is killed, and
:func:`reap_orphans` stops one whose owner and watchdog are both gone, and no other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from exai.emulators.postgres import TempPostgres, reap_orphans

pytestmark = pytest.mark.postgres

# A test worker that starts a cluster, says where it is, and waits to be killed.
OWNER = """
import json, sys, time
from pathlib import Path
from exai.emulators.postgres import TempPostgres
pg = TempPostgres().start()
pid = int((pg._dir / "data" / "postmaster.pid").read_text().split()[0])
print(json.dumps({"dir": str(pg._dir), "postmaster": pid}), flush=True)
time.sleep(600)
"""

# How long a stopped server or an exited process may take to be gone: a bound on a
# hang, not a measure of speed.
GONE_S = 30.0


@pytest.fixture(autouse=True)
def _needs_postgres() -> None:
    try:
        TempPostgres()
    except RuntimeError as exc:
        pytest.skip(f"no local Postgres: {exc}")


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + GONE_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _watchdog(directory: str) -> int:
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--watch" in command and os.fsencode(directory) in command:
            return int(entry.name)
    raise AssertionError(f"no watchdog for {directory}")


def _start_owner() -> tuple[subprocess.Popen[str], dict]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line, "the owner did not start its cluster"
    return owner, json.loads(line)


def test_a_server_whose_owner_is_killed_is_stopped_and_deleted():
    owner, cluster = _start_owner()
    assert _running(cluster["postmaster"])
    owner.kill()
    owner.wait()
    assert _eventually(lambda: not _running(cluster["postmaster"]))
    assert _eventually(lambda: not Path(cluster["dir"]).exists())


def test_orphans_are_reaped_and_nothing_else():
    owner, orphan = _start_owner()
    os.kill(_watchdog(orphan["dir"]), signal.SIGKILL)  # as if both went down together
    owner.kill()
    owner.wait()
    assert _running(orphan["postmaster"])  # nothing else stops it now
    stranger = Path(tempfile.mkdtemp(prefix="exai-pg-"))  # no owner file: not ours to judge
    try:
        with TempPostgres() as live:
            reaped = reap_orphans()
            assert Path(orphan["dir"]) in reaped and not Path(orphan["dir"]).exists()
            assert not _running(orphan["postmaster"])
            assert live._dir is not None and live._dir not in reaped and live._dir.exists()
            assert stranger.exists() and stranger not in reaped
            # An owner's pid taken by a later process: told apart by its start time.
            (live._dir / "owner").write_text(f"{os.getpid()} 1\n")
            assert live._dir in reap_orphans() and not live._dir.exists()
    finally:
        stranger.rmdir()
