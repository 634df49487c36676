"""Moving events from the outbox to the sink, one batch at a time, oldest first.

For each batch: send it; if the sink accepted it, move it to the archive; if
the sink rejected it for good, quarantine it and carry on with the next; if
the sink is unavailable (down, 5xx, hanging past ``send_timeout_s``), try the
same batch again after an exponential backoff with full jitter (tenacity),
for as long as it takes. Nothing leaves the outbox unless the sink took it or
it went to quarantine, so a crash at any point loses nothing, and the sink's
idempotency on ``event_id`` absorbs the batch that may be sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_random_exponential,
)

from exai.audit.outbox import AuditOutbox, OutboxRow
from exai.audit.sinks import Sink, SinkRejected, SinkUnavailable
from exai.sqldb.thread import SqliteThread

__all__ = ["Shipper"]

Batch = tuple[list[OutboxRow], list[dict[str, Any]], str | None]


def _read_batch(outbox: AuditOutbox, limit: int) -> Batch:
    rows = outbox.head(limit)
    return rows, [row.event() for row in rows], outbox.oldest_ts()


class Shipper:
    """Drains an outbox into a sink. Run :meth:`run` as a task; :meth:`stop` ends it
    after the batch in flight.

    Cancelling it mid-batch is safe (nothing is lost) but not clean: a send that
    runs in a thread, as the ``jsonl`` sink's write does, finishes after the
    cancellation, unacknowledged, and the batch goes to the sink again.
    """

    def __init__(
        self,
        outbox: AuditOutbox,
        thread: SqliteThread,
        sink: Sink,
        *,
        batch_size: int,
        interval_s: float,
        backoff_max_s: float,
        send_timeout_s: float,
        log: Any = None,
    ) -> None:
        self._outbox = outbox
        self._thread = thread
        self._sink = sink
        self._batch_size = batch_size
        self._interval_s = interval_s
        self._backoff_max_s = max(backoff_max_s, interval_s)
        self._send_timeout_s = send_timeout_s
        self._log = log or structlog.get_logger("exai.audit")
        self.shipped = 0
        self.last_error: str | None = None
        self.last_shipped_at: float | None = None
        self.oldest_ts: str | None = None
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Ship until :meth:`stop`; a batch the sink keeps refusing is left for later."""
        while not self._stopping.is_set():
            rows, events, self.oldest_ts = await self._thread.call(
                _read_batch, self._outbox, self._batch_size
            )
            if rows:
                try:
                    await self._deliver(rows, events)
                except SinkUnavailable:  # only once stopping: it retries until then
                    return
            if len(rows) < self._batch_size:
                await self.pause(self._interval_s)

    def stop(self) -> None:
        """End :meth:`run` once the batch in flight is acknowledged, or its attempt fails."""
        self._stopping.set()

    def _stopped(self, state: RetryCallState) -> bool:
        return self._stopping.is_set()

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or until :meth:`stop`. Every wait of the shipper's is one,
        tenacity's between attempts included: a sink that is down then gets one more
        attempt at once, rather than holding up the stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def ship_pending(self, deadline: float) -> int:
        """One attempt per batch until the outbox is empty, a send fails, or ``deadline``.

        For shutdown: no backoff, and a failure leaves the rest for next start.
        """
        shipped = 0
        while time.monotonic() < deadline:
            rows, events, self.oldest_ts = await self._thread.call(
                _read_batch, self._outbox, self._batch_size
            )
            if not rows:
                break
            try:
                await self._attempt(events, min(self._send_timeout_s, deadline - time.monotonic()))
            except SinkRejected as exc:
                await self._quarantine(rows, str(exc))
                continue
            except SinkUnavailable as exc:
                await self._record_error(str(exc))
                break
            await self._acknowledge(rows)
            shipped += len(rows)
        return shipped

    async def _deliver(self, rows: list[OutboxRow], events: Sequence[dict[str, Any]]) -> None:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(SinkUnavailable),
            wait=wait_random_exponential(multiplier=self._interval_s, max=self._backoff_max_s),
            stop=self._stopped,
            sleep=self.pause,
            before_sleep=self._before_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    await self._attempt(events, self._send_timeout_s)
        except SinkRejected as exc:
            await self._quarantine(rows, str(exc))
            return
        await self._acknowledge(rows)

    async def _attempt(self, events: Sequence[dict[str, Any]], timeout_s: float) -> None:
        try:
            async with asyncio.timeout(max(timeout_s, 0.001)):
                await self._sink.send(events)
        except TimeoutError as exc:
            raise SinkUnavailable(f"no answer within {timeout_s:.3g}s") from exc
        except SinkRejected:
            raise
        except SinkUnavailable:
            raise
        except Exception as exc:
            raise SinkUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def _acknowledge(self, rows: list[OutboxRow]) -> None:
        self.oldest_ts = await self._thread.call(_acknowledge, self._outbox, rows)
        self.shipped += len(rows)
        self.last_error = None
        self.last_shipped_at = time.time()

    async def _quarantine(self, rows: list[OutboxRow], reason: str) -> None:
        self._log.error(
            "audit batch rejected by sink; quarantined",
            sink=self._sink.name, events=len(rows), reason=reason,
        )  # fmt: skip
        self.oldest_ts = await self._thread.call(_quarantine, self._outbox, rows, reason)
        self.last_error = f"quarantined {len(rows)} events: {reason}"

    async def _record_error(self, message: str) -> None:
        self.last_error = message
        await self._thread.call(self._outbox.record_error, message)

    async def _before_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        message = str(exc) if exc else "unknown error"
        wait = state.next_action.sleep if state.next_action else 0.0
        self._log.warning(
            "audit sink unavailable; retrying batch",
            sink=self._sink.name, attempt=state.attempt_number, retry_in_s=round(wait, 3),
            error=message,
        )  # fmt: skip
        await self._record_error(message)


def _acknowledge(outbox: AuditOutbox, rows: list[OutboxRow]) -> str | None:
    outbox.acknowledge(rows)
    return outbox.oldest_ts()


def _quarantine(outbox: AuditOutbox, rows: list[OutboxRow], reason: str) -> str | None:
    outbox.quarantine(rows, reason)
    return outbox.oldest_ts()
