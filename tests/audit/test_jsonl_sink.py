"""The jsonl sink: every event as one line, in files that rotate by size."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from exai.audit import AuditTrail
from exai.audit.events import new_event
from exai.audit.jsonl_sink import JsonlSink

from .helpers import wait_until


async def test_trail_writes_events_as_json_lines(make_settings, tmp_path: Path) -> None:
    path = tmp_path / "trail" / "audit.jsonl"
    trail = AuditTrail(make_settings(audit_sink="jsonl", audit_jsonl_path=path))
    await trail.start()
    for i in range(30):
        trail.emit("call_started", request_id=str(i))
    await wait_until(lambda: trail.stats()["shipped"] == 30)
    await trail.stop()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["request_id"] for e in lines] == [str(i) for i in range(30)]


def test_files_rotate_and_the_oldest_falls_off(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(path, max_bytes=2000, backups=2)

    async def send_one_by_one() -> None:
        await sink.open()
        for i in range(20):
            event = new_event("call_started", "i", {"request_id": str(i), "pad": "x" * 200})
            await sink.send([event])

    asyncio.run(send_one_by_one())
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())
    newest = [json.loads(line) for line in path.read_text().splitlines()]
    assert newest[-1]["request_id"] == "19"
