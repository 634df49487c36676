"""A writer told to stop while a batch is on its way to the sink.

In-process :class:`~exai.audit.writer.AuditWriter` with the real ``jsonl``
sink, whose file write is slowed (a test double around the real write, which
still happens) so that the stop arrives while the write runs in its thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from exai.audit.jsonl_sink import JsonlSink
from exai.audit.wire import WriterConfig, encode_frame
from exai.audit.writer import AuditWriter


def _config(tmp_path: Path, sink: Path) -> WriterConfig:
    return WriterConfig(
        outbox_path=str(tmp_path / "outbox.sqlite"), max_events=10_000, batch_size=100,
        ship_interval_s=0.05, retry_interval_s=0.05, send_timeout_s=5.0, backoff_max_s=0.2,
        instance_id="test", sink={"kind": "jsonl", "path": str(sink)},
    )  # fmt: skip


async def test_a_stop_during_a_sink_write_sends_that_batch_once(tmp_path: Path, monkeypatch):
    # A clean stop is not a crash: the batch the sink is writing is acknowledged
    # once the write ends, and not written again by the last delivery at stop.
    writing = threading.Event()
    real_write = JsonlSink._write

    def slow_write(self: JsonlSink, data: bytes) -> None:
        writing.set()
        time.sleep(0.5)
        real_write(self, data)

    monkeypatch.setattr(JsonlSink, "_write", slow_write)
    sink = tmp_path / "audit.jsonl"
    sent: list[tuple] = []
    writer = AuditWriter(_config(tmp_path, sink), sent.append)
    await writer.open()
    reader = asyncio.StreamReader()
    running = asyncio.create_task(writer.run(reader))
    records = [("call_finished", time.time(), {"request_id": f"r{i}"}) for i in range(5)]
    reader.feed_data(encode_frame(("batch", 1, 12345, 0, records)))
    await asyncio.to_thread(writing.wait, 10)
    reader.feed_data(encode_frame(("stop", 5.0)))
    await asyncio.wait_for(running, 20)
    lines = [json.loads(line) for line in sink.read_text().splitlines()]
    assert sorted(e["request_id"] for e in lines) == [f"r{i}" for i in range(5)]
    assert sent[-1][0] == "stopped" and sent[-1][1]["pending"] == 0
    assert sent[-1][1]["shipped"] == 5


async def test_a_stop_while_the_sink_is_down_cuts_the_backoff_short(tmp_path: Path, monkeypatch):
    # The sink refuses every write, and the shipper waits out a 40 s backoff before
    # trying again (tenacity's wait fixed at 40 s). The stop must not wait it
    # out: it ends the backoff, makes its one last attempt, keeps the batch in the
    # outbox for the next start, and the writer stops well within its 30 s.
    attempts: list[float] = []

    def down(self: JsonlSink, data: bytes) -> None:
        attempts.append(time.monotonic())
        raise OSError("disk gone")

    monkeypatch.setattr(JsonlSink, "_write", down)
    monkeypatch.setattr("exai.audit.shipper.wait_random_exponential",
                        lambda **_: lambda state: 40.0)  # fmt: skip
    config = _config(tmp_path, tmp_path / "audit.jsonl")
    sent: list[tuple] = []
    writer = AuditWriter(config, sent.append)
    await writer.open()
    reader = asyncio.StreamReader()
    running = asyncio.create_task(writer.run(reader))
    records = [("call_finished", time.time(), {"request_id": f"r{i}"}) for i in range(3)]
    reader.feed_data(encode_frame(("batch", 1, 54321, 0, records)))
    for _ in range(200):
        if attempts:
            break
        await asyncio.sleep(0.05)
    stopped_at = time.monotonic()
    reader.feed_data(encode_frame(("stop", 30.0)))
    await asyncio.wait_for(running, 25)  # not the 40 s backoff, nor the 30 s deadline
    assert len(attempts) >= 2 and attempts[-1] >= stopped_at  # tried again at stop
    assert sent[-1][0] == "stopped" and sent[-1][1]["pending"] == 3  # kept for next start
    assert "disk gone" in (sent[-1][1]["last_error"] or "")
