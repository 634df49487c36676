"""The audit writer process: restarted when it dies, alone when the daemon dies, kept clean.

Each test runs a real writer process (``python -m exai.audit.writer``) behind
a real :class:`~exai.audit.AuditTrail`, and finds it by its working directory
(:func:`~tests.audit.helpers.writer_pids`).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from exai.audit import AuditTrail
from exai.emulators.postgrest import PostgrestEmulator

from .conftest import SERVICE_KEY
from .helpers import stored_ids, wait_until, writer_pids

CHILD = Path(__file__).with_name("emitter_child.py")


def archived(outbox: Path) -> list[str]:
    db = sqlite3.connect(outbox)
    try:
        rows = db.execute("SELECT body FROM archive ORDER BY seq").fetchall()
    finally:
        db.close()
    return [body for (body,) in rows]


async def test_a_writer_killed_mid_run_is_restarted_and_nothing_is_lost_or_stored_twice(
    supabase_settings, postgrest: PostgrestEmulator
) -> None:
    settings = supabase_settings(audit_flush_interval_s=0.005)
    trail = AuditTrail(settings)
    await trail.start()
    [first] = writer_pids(settings.data_dir)
    for i in range(300):
        trail.emit("call_started", request_id=f"a{i}", tool="chat")
    await wait_until(lambda: trail.stats()["buffered"] < 300)  # some of it was sent
    os.kill(first, signal.SIGKILL)
    for i in range(300):
        trail.emit("call_started", request_id=f"b{i}", tool="chat")
    await wait_until(lambda: writer_pids(settings.data_dir) not in ([], [first]))
    await wait_until(lambda: len(stored_ids(postgrest)) >= 600, timeout_s=30)
    await wait_until(lambda: trail.stats()["backlog"] == 0)
    stats = trail.stats()
    await trail.stop()
    rows = postgrest.rows("audit_events")
    assert len(rows) == 600 and len({row["event_id"] for row in rows}) == 600
    assert {row["request_id"] for row in rows} == {f"{p}{i}" for p in "ab" for i in range(300)}
    assert stats["dropped"] == 0 and stats["last_error"] is None


async def test_the_writer_gets_no_secret_in_its_environment_or_arguments(
    make_settings, postgrest: PostgrestEmulator
) -> None:
    settings = make_settings(
        audit_sink="supabase", supabase_url=postgrest.url, supabase_service_role_key=SERVICE_KEY,
        ws_tokens="alice=tok-alice-writer-123", kimi_api_key="kimi-key-writer-456",
        audit_writer_nice=7,
    )  # fmt: skip
    trail = AuditTrail(settings)
    await trail.start()
    try:
        [pid] = writer_pids(settings.data_dir)
        proc = Path(f"/proc/{pid}")
        seen = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        for secret in (SERVICE_KEY, "tok-alice-writer-123", "kimi-key-writer-456"):
            assert secret.encode() not in seen
        assert not any(
            name.startswith(b"EXAI_") for name in (proc / "environ").read_bytes().split(b"\0")
        )
        stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        assert int(stat[16]) - os.getpriority(os.PRIO_PROCESS, 0) == 7  # its nice value
    finally:
        await trail.stop()


async def test_the_writer_ignores_sigterm_and_sigint_and_exits_when_told(make_settings) -> None:
    settings = make_settings()
    trail = AuditTrail(settings)
    await trail.start()
    [pid] = writer_pids(settings.data_dir)
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGINT)  # a Ctrl-C reaches the whole process group
    for i in range(50):
        trail.emit("call_finished", request_id=str(i), status="ok")
    await wait_until(lambda: trail.stats()["backlog"] == 0 and trail.stats()["shipped"] == 50)
    assert writer_pids(settings.data_dir) == [pid]
    await trail.stop()
    assert writer_pids(settings.data_dir) == []
    assert len(archived(settings.outbox_path)) == 50


def test_a_writer_whose_daemon_is_killed_stores_what_it_was_sent_and_exits(
    tmp_path: Path, postgrest: PostgrestEmulator
) -> None:
    data_dir = tmp_path / "data"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("EXAI_", "SUPABASE_"))},
        "EXAI_DATA_DIR": str(data_dir), "EXAI_AUDIT_SINK": "supabase",
        "SUPABASE_URL": postgrest.url, "SUPABASE_SERVICE_ROLE_KEY": SERVICE_KEY,
        "EXAI_AUDIT_FLUSH_INTERVAL_S": "0.01",
    }  # fmt: skip
    postgrest.hang()  # nothing is shipped: what is stored stays in the outbox
    emitter = subprocess.Popen(
        [sys.executable, str(CHILD), "emit"], env=env, cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert emitter.stdout is not None and emitter.stdout.readline().strip() == "started"
    [writer] = writer_pids(data_dir)
    time.sleep(0.5)
    emitter.send_signal(signal.SIGKILL)
    emitter.wait(timeout=10)
    deadline = time.monotonic() + 30
    while writer_pids(data_dir):
        assert time.monotonic() < deadline, "the writer did not exit after its daemon died"
        time.sleep(0.05)
    db = sqlite3.connect(data_dir / "audit-outbox.sqlite3")
    try:
        stored = [r for (r,) in db.execute("SELECT body FROM outbox")]
    finally:
        db.close()
    assert writer not in writer_pids(data_dir) and len(stored) >= 50
