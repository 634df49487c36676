"""The audit writer process: stamping, scrubbing, the outbox and the shipper, off the daemon.

:class:`~exai.audit.trail.AuditTrail` starts one with ``python -m
exai.audit.writer`` and talks to it over its stdin and stdout
(:mod:`exai.audit.wire`). The daemon only keeps each event's kind, time and
fields and hands them over in batches; everything that costs CPU per event
happens here, on another core and under another interpreter lock: event ids
and timestamps, scrubbing, JSON, the SQLite inserts, shipping. Measured, this
took the audit trail's cost per ``echo`` call from more than the rest of the
daemon's protocol work to a few microseconds (docs/audit.md).

What this process does:

1. reads its :class:`~exai.audit.wire.WriterConfig`, opens the outbox and the
   sink, and says ``ready`` with the outbox's counts;
2. stores each batch in one transaction, in order, and acknowledges it; a
   failed write keeps the batch and the ones behind it and is retried every
   ``retry_interval_s``;
3. ships the outbox in the background (:class:`~exai.audit.shipper.Shipper`)
   and reports its counts when they change;
4. on ``stop``: stores what it was sent, tries one last delivery within the
   time it was given, closes and exits; on the end of its input without a
   ``stop`` (the daemon died), it stores what it was sent and exits without
   shipping, so the next daemon's writer is the only one shipping the outbox.

It ignores SIGINT and SIGTERM: a Ctrl-C in a terminal or a service manager's
stop reaches the whole process group, and this process must outlive the
daemon's shutdown long enough to store what the daemon sends last. It ends
when its input ends. Its stdout is the pipe back to the daemon, so stray
output of any library goes to stderr instead.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO, Final

import structlog

from exai.audit.events import stamp_records
from exai.audit.named_sink import sink_from_spec
from exai.audit.outbox import AuditOutbox
from exai.audit.scrub import Scrubber
from exai.audit.shipper import Shipper
from exai.audit.sinks import LocalOnlySink, Sink
from exai.audit.wire import FrameError, WriterConfig, encode_frame, frame_length, parse_frame
from exai.sqldb.thread import SqliteThread

__all__ = ["AuditWriter", "main", "read_message"]

_STATUS_INTERVAL_S: Final = 0.05
_ORPHAN_STORE_S: Final = 30.0  # how long a writer whose daemon died keeps retrying a write

Batch = tuple[int, int, int, list[Any]]  # seq, seed, dropped_before, records


async def read_message(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message on ``reader``, or None at the end of its input."""
    try:
        header = await reader.readexactly(4)
        return parse_frame(await reader.readexactly(frame_length(header)))
    except asyncio.IncompleteReadError:
        return None


class AuditWriter:
    """The outbox, the sink and the shipper of one writer process."""

    def __init__(self, config: WriterConfig, send: Any) -> None:
        self.config = config
        self._send = send
        self._log = structlog.get_logger("exai.audit").bind(instance_id=config.instance_id)
        self._outbox = AuditOutbox(Path(config.outbox_path), max_events=config.max_events)
        self._thread = SqliteThread(None, "exai-audit-outbox")
        self._scrub_many = Scrubber(config.secrets).scrub_many
        self._sink: Sink | None = None
        self._shipper: Shipper | None = None
        self._direct = False
        self._store = self._outbox.append_rows
        self._waiting: deque[Batch] = deque()
        self._arrived = asyncio.Event()
        self._storing = asyncio.Lock()
        self._write_error: str | None = None
        self._shipped_base = 0
        self._archived = 0  # stored straight into the archive (no sink), counted as shipped
        self._last_archived_at: float | None = None
        self._dropped_base = 0
        self._reported: dict[str, Any] | None = None
        self._closing = False

    # --- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        sink = sink_from_spec(self.config.sink, timeout_s=self.config.send_timeout_s)
        try:
            meta = await self._thread.call(self._open_outbox, sink.name)
            await sink.open()
        except BaseException:
            await self._thread.call(self._outbox.close)
            self._thread.shutdown(wait=False)
            raise
        self._shipped_base = int(meta.get("shipped") or 0)
        self._dropped_base = int(meta.get("dropped") or 0)
        self._sink = sink
        # With no sink, delivery is the move to the archive: the rows go there at once
        # (the shipper still drains whatever an earlier run or ``exai audit`` queued).
        self._direct = isinstance(sink, LocalOnlySink)
        self._store = self._outbox.archive_rows if self._direct else self._outbox.append_rows
        self._shipper = Shipper(
            self._outbox, self._thread, sink,
            batch_size=self.config.batch_size, interval_s=self.config.ship_interval_s,
            backoff_max_s=self.config.backoff_max_s, send_timeout_s=self.config.send_timeout_s,
            log=self._log,
        )  # fmt: skip

    def _open_outbox(self, sink_name: str) -> dict[str, Any]:
        self._outbox.open()
        self._outbox.set_state("sink", sink_name)
        return self._outbox.meta()

    async def run(self, reader: asyncio.StreamReader) -> None:
        """Serve the daemon until ``stop`` or the end of input; then close."""
        assert self._shipper is not None and self._sink is not None
        store = asyncio.create_task(self._store_loop(), name="audit-store")
        ship = asyncio.create_task(self._ship_loop(), name="audit-ship")
        status = asyncio.create_task(self._status_loop(), name="audit-status")
        stop_timeout_s: float | None = None
        while True:
            message = await read_message(reader)
            if message is None:
                break
            if message[0] == "batch":
                self._waiting.append(message[1:])
                self._arrived.set()
            elif message[0] == "stop":
                stop_timeout_s = float(message[1])
                break
            else:
                raise FrameError(f"unexpected message {message[0]!r}")
        started = time.monotonic()
        deadline = started + (stop_timeout_s if stop_timeout_s is not None else _ORPHAN_STORE_S)
        # The shipper ends after the batch it is sending, so that batch is acknowledged
        # rather than sent again below; past the deadline it is cancelled.
        self._shipper.stop()
        status.cancel()
        self._closing = True  # a write in progress finishes; then the loop ends
        self._arrived.set()
        await asyncio.gather(store, status, return_exceptions=True)
        while self._waiting and time.monotonic() < deadline:
            if not await self._store_waiting():
                await asyncio.sleep(min(self.config.retry_interval_s, 1.0))
        if self._waiting:
            unstored = sum(len(batch[3]) for batch in self._waiting)
            self._log.error("audit events not stored at exit", lost=unstored)
        await _within(ship, deadline)
        if stop_timeout_s is not None:
            await _within(self._shipper.ship_pending(deadline), deadline)
        if not await _within(self._sink.close(), deadline, floor_s=0.5):
            self._log.warning("audit sink did not close in time", sink=self._sink.name)
        await self._thread.call(self._outbox.close)
        self._thread.shutdown(wait=False)
        self._send(("stopped", self.status()))

    # --- storing ------------------------------------------------------------------

    async def _store_loop(self) -> None:
        while not self._closing:
            if self._waiting:
                try:
                    await asyncio.wait_for(self._arrived.wait(), self.config.retry_interval_s)
                except TimeoutError:
                    pass
            else:
                await self._arrived.wait()
            self._arrived.clear()
            await self._store_waiting()

    async def _store_waiting(self) -> bool:
        """Store waiting batches in order; False if a write failed (they stay waiting)."""
        async with self._storing:
            while self._waiting:
                seq, seed, dropped_before, records = self._waiting[0]
                rows = stamp_records(records, seed, self.config.instance_id, self._scrub_many)
                try:
                    result = await self._thread.call(
                        self._store, rows, dropped_before=dropped_before
                    )
                except Exception as exc:
                    self._write_error = f"outbox write failed: {type(exc).__name__}: {exc}"
                    self._log.error("audit outbox write failed", error=str(exc), kept=len(rows))
                    self._report()
                    return False
                self._waiting.popleft()
                self._write_error = None
                shipper = self._shipper
                if self._direct:
                    self._archived += result.stored
                    self._last_archived_at = time.time()
                elif result.stored and shipper is not None and shipper.oldest_ts is None:
                    shipper.oldest_ts = rows[0][1]
                status = self.status()
                self._reported = status
                self._send(("acked", seq, result.dropped - dropped_before, status))
        return True

    # --- shipping and reporting -----------------------------------------------------

    async def _ship_loop(self) -> None:
        """Run the shipper; if the outbox itself fails, log, wait, and run it again."""
        assert self._shipper is not None
        while True:
            try:
                await self._shipper.run()
                return  # stopped
            except Exception as exc:
                self._shipper.last_error = f"shipper: {type(exc).__name__}: {exc}"
                self._log.exception("audit shipper failed; restarting")
                await self._shipper.pause(self.config.backoff_max_s)

    async def _status_loop(self) -> None:
        interval = min(self.config.ship_interval_s, _STATUS_INTERVAL_S)
        while True:
            await asyncio.sleep(interval)
            self._report()

    def _report(self) -> None:
        status = self.status()
        if status != self._reported:
            self._reported = status
            self._send(("status", status))

    def status(self) -> dict[str, Any]:
        """The counts the daemon shows in ``stats()``; plain values only."""
        shipper, outbox = self._shipper, self._outbox
        return {
            "pending": outbox.pending,
            "quarantined": outbox.quarantined,
            "shipped": self._shipped_base + self._archived + (shipper.shipped if shipper else 0),
            "dropped_base": self._dropped_base,
            "oldest_ts": shipper.oldest_ts if shipper and outbox.pending else None,
            "last_error": self._write_error or (shipper.last_error if shipper else None),
            "last_shipped_at": max(
                (shipper.last_shipped_at if shipper else None) or 0.0,
                self._last_archived_at or 0.0,
            )
            or None,
            "sink": self._sink.name if self._sink else None,
        }


async def _within(awaitable: Any, deadline: float, *, floor_s: float = 0.0) -> bool:
    """Await until ``deadline`` (at least ``floor_s``); False if it had to be cancelled."""
    try:
        await asyncio.wait_for(awaitable, timeout=max(floor_s, deadline - time.monotonic()))
    except TimeoutError:
        return False
    return True


class _Closed(asyncio.Protocol):
    """Write-pipe protocol that says when the pipe is closed, after its buffer was written."""

    def __init__(self) -> None:
        self.closed = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _serve(stdin: BinaryIO, out: BinaryIO) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    transport, pipe = await loop.connect_write_pipe(_Closed, out)

    def send(message: tuple[Any, ...]) -> None:
        if not transport.is_closing():
            transport.write(encode_frame(message))

    async def close() -> None:
        transport.close()  # what was written is flushed first
        await pipe.closed

    first = await read_message(reader)
    if first is None:
        return 0
    config = WriterConfig.from_message(first)
    if config.nice and hasattr(os, "nice"):  # POSIX only
        os.nice(config.nice)
    from exai.logs import configure_logging

    configure_logging(config.log_format, config.log_level,
                      scrubber=Scrubber(config.secrets).scrub)  # fmt: skip
    writer = AuditWriter(config, send)
    try:
        await writer.open()
    except Exception as exc:
        send(("fatal", f"{type(exc).__name__}: {exc}"))
        await close()
        return 1
    send(("ready", writer.status()))
    await writer.run(reader)
    await close()
    return 0


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = open(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    stdin = open(0, "rb", buffering=0, closefd=False)
    sys.exit(asyncio.run(_serve(stdin, out)))


if __name__ == "__main__":
    main()
