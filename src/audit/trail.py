"""The audit trail as the daemon sees it: ``emit`` now, durable soon, shipped eventually.

:meth:`AuditTrail.emit` keeps the event's kind, the time and its fields in an
in-memory deque and returns: about a microsecond, no I/O, nothing awaited.
Every ``audit_flush_interval_s`` a task hands what accumulated to the audit
writer process (:mod:`exai.audit.writer`) as one marshalled frame; that
process stamps, scrubs and encodes the events, stores them in the outbox and
ships them. So a call pays neither for the sink nor for the outbox, and the
writer's work runs on another core under another interpreter lock.

Each batch is kept until the writer says it is committed. If the writer
exits while the daemon runs, it is started again and the batches it had not
committed are sent again; their event ids were fixed when they were first
sent, so nothing is stored twice. If the daemon dies, the writer stores what
it had been sent and exits.

Nothing is dropped below ``audit_max_outbox_events`` undelivered events
(memory plus outbox plus quarantine). Past it, new events are dropped,
counted in :meth:`stats` and in the outbox file, and logged at error level
(at most once per ``_DROP_LOG_INTERVAL_S``), in the background because
``emit`` does no I/O.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import structlog

from exai.audit.events import Record, parse_ts
from exai.audit.link import WriterFailed, WriterLink
from exai.audit.named_sink import sink_spec
from exai.audit.scrub import PLAIN_TYPES, Scrubber, secrets_from_settings
from exai.audit.wire import WriterConfig, encode_frame

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["AuditTrail", "default_instance_id"]

_WRITE_CHUNK: Final = 2000  # events per frame: keeps each marshal step short on the loop
_DROP_LOG_INTERVAL_S: Final = 10.0
_RESTART_FIRST_S: Final = 0.1
_CLOSE_GRACE_S: Final = 2.0  # after stop()'s deadline: the writer closes its sink and file


def default_instance_id() -> str:
    """``host-pid-random``: unique per daemon process, readable in a query."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class AuditTrail:
    """Emit audit events from anywhere; :meth:`start` and :meth:`stop` bracket the writer.

    ``send_timeout_s`` bounds one delivery attempt, so a hanging sink becomes
    a retry. ``backoff_max_s`` caps the wait between attempts; by default it
    is 30 times ``audit_ship_interval_s``. ``clock`` (monotonic seconds) times
    the last drop, which ``/ready`` looks at (:mod:`exai.audit.readiness`).
    """

    def __init__(
        self,
        settings: Settings,
        instance_id: str | None = None,
        *,
        send_timeout_s: float = 30.0,
        backoff_max_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.instance_id = instance_id or default_instance_id()
        self.enabled = settings.audit_enabled
        self._settings = settings
        self._max_events = settings.audit_max_outbox_events
        self._secrets = secrets_from_settings(settings)
        self._scrubber = Scrubber(self._secrets)
        self._buffer: deque[Record] = deque()
        self._send_timeout_s = send_timeout_s
        self._backoff_max_s = (
            backoff_max_s if backoff_max_s is not None else 30 * settings.audit_ship_interval_s
        )
        self._log = structlog.get_logger("exai.audit").bind(instance_id=self.instance_id)
        self._link: WriterLink | None = None
        self._seq = 0
        self._unacked: dict[int, tuple[int, bytes]] = {}  # seq -> (events, frame)
        self._in_flight = 0
        self._pending = 0  # the writer's counts, as it last reported them
        self._quarantined = 0
        self._status: dict[str, Any] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_requested = asyncio.Event()
        self._state = "new"
        self._dropped_base: int | None = None
        self._dropped = 0
        self._dropped_unpersisted = 0
        self._dropped_unlogged = 0
        self._last_drop: float | None = None  # on self.clock
        self._last_drop_log = 0.0
        self._write_error: str | None = None

    # --- the call path ----------------------------------------------------------

    def emit(self, kind: str, /, **fields: Any) -> None:
        """Record an event. Synchronous, no I/O, never raises; safe from any thread.

        The limit check may under-count for a moment (events the writer has
        stored but not yet reported), never over-count, so no event is dropped
        below the limit; the outbox enforces it exactly.
        """
        if not self.enabled:
            return
        undelivered = self._pending + self._quarantined + self._in_flight + len(self._buffer)
        if self._state == "stopped" or undelivered >= self._max_events:
            self._count_drop()
            return
        for value in fields.values():
            if type(value) not in PLAIN_TYPES:
                try:
                    fields = self._scrubber.scrub(fields)
                except Exception as exc:  # a bug in copying must not fail the call that emits
                    self._write_error = f"emit {kind}: {type(exc).__name__}: {exc}"
                    self._count_drop()
                    return
                break
        self._buffer.append((kind, time.time(), fields))

    def _count_drop(self) -> None:
        self._dropped += 1
        self._dropped_unpersisted += 1
        self._dropped_unlogged += 1
        self._last_drop = self.clock()

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Start the writer process and begin handing it events, resuming any backlog."""
        if not self.enabled or self._state != "new":
            return
        s = self._settings
        config = WriterConfig(
            outbox_path=str(s.outbox_path), max_events=self._max_events,
            batch_size=s.audit_batch_size, ship_interval_s=s.audit_ship_interval_s,
            retry_interval_s=s.audit_flush_interval_s, send_timeout_s=self._send_timeout_s,
            backoff_max_s=self._backoff_max_s, instance_id=self.instance_id,
            sink=sink_spec(s), secrets=self._secrets, log_format=s.log_format,
            log_level=s.log_level, nice=s.audit_writer_nice,
        )  # fmt: skip
        self._link = WriterLink(config, self._on_message)
        self._apply(await self._link.start())
        self._state = "running"
        self._tasks = [
            asyncio.create_task(self._write_loop(), name="exai-audit-writer"),
            asyncio.create_task(self._supervise(config), name="exai-audit-supervisor"),
        ]
        if self._pending:
            self._log.info("audit outbox backlog resumed", backlog=self._pending)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Hand memory to the writer, let it try one last delivery and exit; within ``timeout_s``.

        The writer may take up to two seconds more to close. Events emitted after
        this are dropped and counted; anything not stored by the deadline is
        lost, counted and logged.
        """
        if self._state != "running":
            self._state = "stopped"
            if self._buffer:
                lost = len(self._buffer)
                self._buffer.clear()
                self._dropped += lost
                self._log.error("audit trail stopped before it started; events lost", lost=lost)
            return
        assert self._link is not None
        deadline = time.monotonic() + timeout_s
        self._state = "stopping"
        self._stop_requested.set()
        writer, supervisor = self._tasks
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)
        await _within(writer, deadline)
        link = self._link
        link.send(encode_frame(("stop", max(0.0, deadline - time.monotonic()))))
        link.close_input()
        if not await _within(link.wait_closed(), deadline + _CLOSE_GRACE_S):
            link.kill()
            await link.wait_closed()
            self._log.error("audit writer did not finish in time", timeout_s=timeout_s)
        self._state = "stopped"
        lost = len(self._buffer) + self._in_flight
        if lost:
            self._buffer.clear()
            self._unacked.clear()
            self._in_flight = 0
            self._dropped += lost
            self._log.error(
                "audit events lost at shutdown deadline", lost=lost, timeout_s=timeout_s
            )
        self._log_drops(force=True)

    # --- background tasks -----------------------------------------------------------

    async def _write_loop(self) -> None:
        interval = self._settings.audit_flush_interval_s
        while not self._stop_requested.is_set():
            try:
                await asyncio.wait_for(self._stop_requested.wait(), timeout=interval)
            except TimeoutError:
                pass
            await self._send_buffer()
            self._log_drops()
        await self._send_buffer()  # what came since, when stop() was called before a pass

    async def _send_buffer(self) -> None:
        """Hand the deque to the writer, one frame per chunk, kept until it is committed."""
        assert self._link is not None
        while self._buffer or self._dropped_unpersisted:
            buffer = self._buffer
            records = [buffer.popleft() for _ in range(min(len(buffer), _WRITE_CHUNK))]
            dropped_before, self._dropped_unpersisted = self._dropped_unpersisted, 0
            self._seq += 1
            frame = _batch_frame(self._seq, dropped_before, records)
            self._unacked[self._seq] = (len(records), frame)
            self._in_flight += len(records)
            self._link.send(frame)
            await self._link.drain()

    async def _supervise(self, config: WriterConfig) -> None:
        """Start the writer again whenever it exits while the trail runs."""
        while True:
            assert self._link is not None
            code = await self._link.wait_closed()
            self._write_error = f"audit writer exited with code {code}; restarting it"
            self._log.error("audit writer exited; restarting it", code=code,
                            unstored=self._in_flight)  # fmt: skip
            delay = _RESTART_FIRST_S
            while True:
                await asyncio.sleep(delay)
                link = WriterLink(config, self._on_message)
                try:
                    status = await link.start()
                except (WriterFailed, OSError) as exc:
                    self._write_error = f"audit writer did not start: {exc}"
                    self._log.error("audit writer did not start", error=str(exc))
                    delay = min(delay * 2, max(self._backoff_max_s, _RESTART_FIRST_S))
                    continue
                break
            self._link = link
            self._apply(status)
            self._write_error = None
            for seq in sorted(self._unacked):  # no await from here: frames keep their order
                link.send(self._unacked[seq][1])

    def _on_message(self, message: tuple[Any, ...]) -> None:
        name = message[0]
        if name == "acked":
            _, seq, overflow, status = message
            sent = self._unacked.pop(seq, None)
            if sent is not None:
                self._in_flight -= sent[0]
            if overflow:
                self._dropped += overflow
                self._dropped_unlogged += overflow
                self._last_drop = self.clock()
            self._apply(status)
        elif name in ("status", "stopped"):
            self._apply(message[1])

    def _apply(self, status: dict[str, Any]) -> None:
        self._status = status
        self._pending = int(status.get("pending") or 0)
        self._quarantined = int(status.get("quarantined") or 0)
        if self._dropped_base is None:
            self._dropped_base = int(status.get("dropped_base") or 0)

    def _log_drops(self, *, force: bool = False) -> None:
        now = time.monotonic()
        due = force or now - self._last_drop_log >= _DROP_LOG_INTERVAL_S
        if self._dropped_unlogged and due:
            self._log.error(
                "audit events dropped: outbox full",
                dropped=self._dropped_unlogged,
                dropped_total=(self._dropped_base or 0) + self._dropped,
                limit=self._max_events,
                outbox=str(self._settings.outbox_path),
            )
            self._dropped_unlogged = 0
            self._last_drop_log = now

    # --- observation -----------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counters for /metrics, /ready and ``exai status``; cheap, no I/O.

        ``dropped`` counts every event this outbox ever dropped;
        ``last_drop_age_s`` is the time since this process last dropped one.
        """
        status = self._status
        buffered = self._in_flight + len(self._buffer)
        oldest = status.get("oldest_ts") if self._pending else None
        age = None
        if oldest is not None:
            age = max(0.0, (datetime.now(UTC) - parse_ts(oldest)).total_seconds())
        elif self._buffer:
            age = max(0.0, time.time() - self._buffer[0][1])
        return {
            "enabled": self.enabled,
            "state": self._state,
            "sink": status.get("sink") or self._settings.audit_sink,
            "backlog": self._pending + buffered,
            "buffered": buffered,
            "oldest_event_age_s": age,
            "shipped": int(status.get("shipped") or 0),
            "quarantined": self._quarantined,
            "dropped": (self._dropped_base or 0) + self._dropped,
            "last_drop_age_s": (
                None if self._last_drop is None else max(0.0, self.clock() - self._last_drop)
            ),
            "last_error": self._write_error or status.get("last_error"),
            "last_shipped_at": status.get("last_shipped_at"),
            "max_outbox_events": self._max_events,
        }


def _batch_frame(seq: int, dropped_before: int, records: list[Record]) -> bytes:
    """The frame for one batch; its event ids are fixed here, by the seed."""
    message = ("batch", seq, random.getrandbits(128), dropped_before, records)
    try:
        return encode_frame(message)
    except ValueError:  # a value of a subclass marshal refuses (an enum that is a str)
        import json

        plain = json.loads(json.dumps(records, default=str))
        return encode_frame((*message[:4], plain))


async def _within(awaitable: Awaitable[Any], deadline: float, *, floor_s: float = 0.0) -> bool:
    """Await until ``deadline`` (at least ``floor_s``); False if it had to be cancelled."""
    try:
        await asyncio.wait_for(awaitable, timeout=max(floor_s, deadline - time.monotonic()))
    except TimeoutError:
        return False
    return True
