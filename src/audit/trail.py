"""The audit trail as the daemon sees it: ``emit`` now, durable soon, shipped eventually.

:meth:`AuditTrail.emit` stamps, scrubs and appends to an in-memory deque and
returns; it never awaits and never touches a file or a socket, so a call is
never slower because the sink is slow. A writer task moves the deque into the
outbox file every ``audit_flush_interval_s`` (one transaction per batch), and
a :class:`~exai.audit.shipper.Shipper` task drains the outbox into the sink.

Nothing is dropped below ``audit_max_outbox_events`` undelivered events
(memory plus outbox plus quarantine). Past it, new events are dropped,
counted in :meth:`stats` and in the outbox file, and logged at error level by
the writer (at most once per ``_DROP_LOG_INTERVAL_S``): the log is written in
the background because ``emit`` does no I/O.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import structlog

from exai.audit.events import new_event, parse_ts
from exai.audit.outbox import AuditOutbox
from exai.audit.outbox_thread import OutboxThread
from exai.audit.scrub import Scrubber, secrets_from_settings
from exai.audit.shipper import Shipper
from exai.audit.sinks import Sink, make_sink

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["AuditTrail", "default_instance_id"]

_WRITE_CHUNK: Final = 5000
_DROP_LOG_INTERVAL_S: Final = 10.0


def default_instance_id() -> str:
    """``host-pid-random``: unique per daemon process, readable in a query."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class AuditTrail:
    """Emit audit events from anywhere; :meth:`start` and :meth:`stop` bracket shipping.

    ``sink`` replaces the one ``EXAI_AUDIT_SINK`` names (tests, benchmarks).
    ``send_timeout_s`` bounds one delivery attempt, so a hanging sink becomes
    a retry. ``backoff_max_s`` caps the wait between attempts; by default it
    is 30 times ``audit_ship_interval_s``.
    """

    def __init__(
        self,
        settings: Settings,
        instance_id: str | None = None,
        *,
        sink: Sink | None = None,
        send_timeout_s: float = 30.0,
        backoff_max_s: float | None = None,
    ) -> None:
        self.instance_id = instance_id or default_instance_id()
        self.enabled = settings.audit_enabled
        self._settings = settings
        self._max_events = settings.audit_max_outbox_events
        self._scrubber = Scrubber(secrets_from_settings(settings))
        self._buffer: deque[dict[str, Any]] = deque()
        self._writing = 0
        self._sink_override = sink
        self._send_timeout_s = send_timeout_s
        self._backoff_max_s = (
            backoff_max_s if backoff_max_s is not None else 30 * settings.audit_ship_interval_s
        )
        self._log = structlog.get_logger("exai.audit").bind(instance_id=self.instance_id)
        self._outbox = AuditOutbox(settings.outbox_path, max_events=self._max_events)
        self._thread: OutboxThread | None = None
        self._sink: Sink | None = None
        self._shipper: Shipper | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_requested = asyncio.Event()
        self._state = "new"
        self._dropped_base = 0
        self._dropped = 0
        self._dropped_unpersisted = 0
        self._dropped_unlogged = 0
        self._last_drop_log = 0.0
        self._shipped_base = 0
        self._write_error: str | None = None

    # --- the call path ----------------------------------------------------------

    def emit(self, kind: str, /, **fields: Any) -> None:
        """Record an event. Synchronous, no I/O, never raises; safe from any thread.

        The limit check may under-count for a moment (a chunk being written is
        in neither the deque nor the outbox count), never over-count, so no
        event is dropped below the limit; the outbox enforces it exactly.
        """
        if not self.enabled:
            return
        undelivered = self._outbox.pending + self._outbox.quarantined + len(self._buffer)
        if self._state == "stopped" or undelivered >= self._max_events:
            self._count_drop()
            return
        try:
            event = new_event(kind, self.instance_id, self._scrubber.scrub(fields))
        except Exception as exc:  # a bug in scrubbing must not fail the call that emits
            self._write_error = f"emit {kind}: {type(exc).__name__}: {exc}"
            self._count_drop()
            return
        self._buffer.append(event)

    def _count_drop(self) -> None:
        self._dropped += 1
        self._dropped_unpersisted += 1
        self._dropped_unlogged += 1

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Open the outbox and start writing and shipping, resuming any backlog."""
        if not self.enabled or self._state != "new":
            return
        self._thread = OutboxThread()
        sink = self._sink_override or make_sink(self._settings, timeout_s=self._send_timeout_s)
        try:
            meta = await self._thread.call(self._open_outbox, sink.name)
            await sink.open()
        except BaseException:
            await self._thread.call(self._outbox.close)
            self._thread.shutdown(wait=False)
            raise
        self._dropped_base = int(meta.get("dropped") or 0)
        self._shipped_base = int(meta.get("shipped") or 0)
        self._sink = sink
        self._shipper = Shipper(
            self._outbox,
            self._thread,
            sink,
            batch_size=self._settings.audit_batch_size,
            interval_s=self._settings.audit_ship_interval_s,
            backoff_max_s=self._backoff_max_s,
            send_timeout_s=self._send_timeout_s,
            log=self._log,
        )
        self._state = "running"
        self._tasks = [
            asyncio.create_task(self._write_loop(), name="exai-audit-writer"),
            asyncio.create_task(self._ship_loop(), name="exai-audit-shipper"),
        ]
        if self._outbox.pending:
            self._log.info("audit outbox backlog resumed", backlog=self._outbox.pending)

    def _open_outbox(self, sink_name: str) -> dict[str, Any]:
        self._outbox.open()
        self._outbox.set_state("sink", sink_name)
        return self._outbox.meta()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Flush memory to the outbox, try one last delivery, close; all within ``timeout_s``.

        Closing the sink and the file may take up to a second more. Events
        emitted after this are dropped and counted; anything still in memory at
        the deadline is lost, counted and logged.
        """
        if self._state != "running":
            self._state = "stopped"
            if self._buffer:
                lost = len(self._buffer)
                self._buffer.clear()
                self._dropped += lost
                self._log.error("audit trail stopped before it started; events lost", lost=lost)
            return
        assert self._shipper is not None and self._sink is not None and self._thread is not None
        deadline = time.monotonic() + timeout_s
        self._state = "stopping"
        self._stop_requested.set()
        writer, shipper_task = self._tasks
        shipper_task.cancel()
        await asyncio.gather(shipper_task, return_exceptions=True)
        flushed = await _within(writer, deadline) and await _within(self._flush(), deadline)
        self._state = "stopped"
        self._log_drops(force=True)
        if not flushed:
            lost = len(self._buffer)
            self._buffer.clear()
            self._dropped += lost
            self._log.error(
                "audit events lost at shutdown deadline", lost=lost, timeout_s=timeout_s
            )
        await _within(self._shipper.ship_pending(deadline), deadline)
        if not await _within(self._sink.close(), deadline, floor_s=0.5):
            self._log.warning("audit sink did not close in time", sink=self._sink.name)
        if not await _within(self._thread.call(self._outbox.close), deadline, floor_s=0.5):
            self._log.error("audit outbox did not close in time", path=str(self._outbox.path))
        self._thread.shutdown(wait=False)

    # --- background tasks -----------------------------------------------------------

    async def _write_loop(self) -> None:
        interval = self._settings.audit_flush_interval_s
        while not self._stop_requested.is_set():
            try:
                await asyncio.wait_for(self._stop_requested.wait(), timeout=interval)
            except TimeoutError:
                pass
            await self._flush()
            self._log_drops()

    async def _flush(self) -> None:
        """Move the deque into the outbox; on a write error, put the events back."""
        assert self._thread is not None
        while self._buffer or self._dropped_unpersisted:
            chunk = [self._buffer.popleft() for _ in range(min(len(self._buffer), _WRITE_CHUNK))]
            dropped_before, self._dropped_unpersisted = self._dropped_unpersisted, 0
            self._writing = len(chunk)
            try:
                result = await self._thread.call(
                    self._outbox.append, chunk, dropped_before=dropped_before
                )
            except Exception as exc:
                self._writing = 0
                self._buffer.extendleft(reversed(chunk))
                self._dropped_unpersisted += dropped_before
                self._write_error = f"outbox write failed: {type(exc).__name__}: {exc}"
                self._log.error("audit outbox write failed", error=str(exc), kept=len(chunk))
                return
            self._writing = 0
            overflow = result.dropped - dropped_before
            if overflow:
                self._dropped += overflow
                self._dropped_unlogged += overflow
            self._write_error = None
            if result.stored and self._shipper and self._shipper.oldest_ts is None:
                self._shipper.oldest_ts = chunk[0]["ts"]

    async def _ship_loop(self) -> None:
        """Run the shipper; if the outbox itself fails, log, wait, and run it again."""
        assert self._shipper is not None
        while True:
            try:
                await self._shipper.run()
            except Exception as exc:
                self._shipper.last_error = f"shipper: {type(exc).__name__}: {exc}"
                self._log.exception("audit shipper failed; restarting")
                await asyncio.sleep(self._backoff_max_s)

    def _log_drops(self, *, force: bool = False) -> None:
        now = time.monotonic()
        due = force or now - self._last_drop_log >= _DROP_LOG_INTERVAL_S
        if self._dropped_unlogged and due:
            self._log.error(
                "audit events dropped: outbox full",
                dropped=self._dropped_unlogged,
                dropped_total=self._dropped_base + self._dropped,
                limit=self._max_events,
                outbox=str(self._outbox.path),
            )
            self._dropped_unlogged = 0
            self._last_drop_log = now

    # --- observation -----------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counters for /metrics, /ready and ``exai status``; cheap, no I/O."""
        shipper = self._shipper
        oldest = shipper.oldest_ts if shipper and self._outbox.pending else None
        if oldest is None and self._buffer:
            oldest = self._buffer[0]["ts"]
        age = None
        if oldest is not None:
            age = max(0.0, (datetime.now(UTC) - parse_ts(oldest)).total_seconds())
        last_error = self._write_error or (shipper.last_error if shipper else None)
        return {
            "enabled": self.enabled,
            "state": self._state,
            "sink": self._sink.name if self._sink else self._settings.audit_sink,
            "backlog": self._outbox.pending + self._writing + len(self._buffer),
            "buffered": self._writing + len(self._buffer),
            "oldest_event_age_s": age,
            "shipped": self._shipped_base + (shipper.shipped if shipper else 0),
            "quarantined": self._outbox.quarantined,
            "dropped": self._dropped_base + self._dropped,
            "last_error": last_error,
            "last_shipped_at": shipper.last_shipped_at if shipper else None,
            "max_outbox_events": self._max_events,
        }


async def _within(awaitable: Awaitable[Any], deadline: float, *, floor_s: float = 0.0) -> bool:
    """Await until ``deadline`` (at least ``floor_s``); False if it had to be cancelled."""
    try:
        await asyncio.wait_for(awaitable, timeout=max(floor_s, deadline - time.monotonic()))
    except TimeoutError:
        return False
    return True
