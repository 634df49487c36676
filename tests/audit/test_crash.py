"""A daemon SIGKILLed while events flow loses nothing that reached the outbox."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from exai.emulators.postgrest import PostgrestEmulator

from .conftest import SERVICE_KEY
from .helpers import stored_ids, writer_pids

CHILD = Path(__file__).with_name("emitter_child.py")


def _poll(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _ids(outbox: Path, table: str) -> set[str]:
    db = sqlite3.connect(outbox)
    try:
        return {row[0] for row in db.execute(f"SELECT event_id FROM {table}")}
    finally:
        db.close()


def _child(mode: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), mode], env=env, cwd=cwd, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


def test_sigkill_while_emitting_then_restart_delivers_everything_once(
    tmp_path: Path, postgrest: PostgrestEmulator
) -> None:
    data_dir = tmp_path / "data"
    outbox = data_dir / "audit-outbox.sqlite3"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("EXAI_", "SUPABASE_"))},
        "EXAI_DATA_DIR": str(data_dir),
        "EXAI_AUDIT_SINK": "supabase",
        "SUPABASE_URL": postgrest.url,
        "SUPABASE_SERVICE_ROLE_KEY": SERVICE_KEY,
        "EXAI_AUDIT_FLUSH_INTERVAL_S": "0.01",
        "EXAI_AUDIT_SHIP_INTERVAL_S": "0.01",
        "EXAI_AUDIT_BATCH_SIZE": "100",
    }
    postgrest.latency_s = 0.02  # shipping lags emitting, so a backlog builds up
    emitter = _child("emit", env, tmp_path)
    try:
        _poll(lambda: len(stored_ids(postgrest)) >= 300)
        _poll(lambda: outbox.exists() and len(_ids(outbox, "outbox")) >= 300)
    finally:
        emitter.send_signal(signal.SIGKILL)
        emitter.wait(timeout=10)
    assert emitter.returncode == -signal.SIGKILL
    # Its writer process stores what it had been sent, then exits on its own.
    _poll(lambda: not writer_pids(data_dir))

    pending, shipped = _ids(outbox, "outbox"), _ids(outbox, "archive")
    assert pending and shipped and pending.isdisjoint(shipped)
    assert shipped <= set(stored_ids(postgrest))

    postgrest.latency_s = 0.0
    drainer = _child("drain", env, tmp_path)
    out, _ = drainer.communicate(timeout=60)
    assert drainer.returncode == 0 and out.strip() == "drained"

    ids = stored_ids(postgrest)
    assert len(ids) == len(set(ids))
    assert set(ids) == pending | shipped
    sent = [row["event_id"] for write in postgrest.writes() for row in write.rows]
    assert len(sent) - len(set(sent)) <= 100  # at most the batch in flight at the kill
