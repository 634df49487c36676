"""The span writer process: keeping, scrubbing, encoding and exporting, off the traced process.

A traced process (``exai serve``, ``exai shim``) starts one with ``python -m
exai.tracing.writer`` (:mod:`exai.tracing.link`) and hands it its ended spans
as records (:mod:`exai.tracing.records`) in batches over its stdin
(:mod:`exai.tracing.wire`). Everything that costs CPU per span happens here,
under another interpreter lock and on whichever core is free: the tail-based
keeping decision (:mod:`exai.tracing.keep`, with ``EXAI_TRACE_KEEP=tail``),
masking credentials in every string, OTLP protobuf encoding
(:mod:`exai.tracing.otlp`) and the HTTP export with its retries
(:mod:`exai.tracing.post`).

Spans wait in one queue of at most ``max_queue`` spans; a batch goes out when
``batch_size`` spans wait or the oldest has waited ``delay_s``. While the
collector takes them, nothing is lost: the queue drains faster than a daemon
fills it. While it is down, each batch fails after its retries within the
export timeout, and once the queue is full new spans are dropped; both are
counted and reported back (``/metrics``, ``exai status``).

On ``stop`` it exports what is queued until the deadline it was given and
fails the rest unsent; on the end of its input without ``stop`` (its parent
died) it does the same within the export timeout. It ignores SIGINT and
SIGTERM, as the audit writer does: a Ctrl-C reaches the whole process group,
and this process must outlive its parent's shutdown long enough to export
what the parent sends last. Its stdout is the pipe back; stray output of any
library goes to stderr.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import sys
import threading
import time
from collections import deque
from typing import Any, BinaryIO

from exai.logs import get_logger
from exai.tracing.export import worth_logging
from exai.tracing.keep import TailKeeper
from exai.tracing.limits import SpanLimits
from exai.tracing.otlp import Encoder
from exai.tracing.post import Poster, PostOptions
from exai.tracing.records import (
    ATTRIBUTES,
    CALL_ATTRIBUTES,
    CALL_SPANS,
    EVENTS,
    FACE_ATTRIBUTES,
    LEAVES,
    LINKS,
    Record,
    expand,
    spans_in,
    standard,
)
from exai.tracing.wire import encode_frame, read_config, read_frame

__all__ = ["SpanWriter", "main"]

log = get_logger("exai.tracing")

_REPORT_INTERVAL_S = 0.1


class SpanWriter:
    def __init__(self, config: dict[str, Any], send: Any) -> None:
        scrub = config.get("scrub")
        text = functools.lru_cache(maxsize=16384)(scrub) if scrub is not None else None
        self.encoder = Encoder(config["resource"], tuple(config["scope"]), text)
        self.poster = Poster(PostOptions(**config["post"]), config["user_agent"])
        self.timeout_s = float(config["post"]["timeout_s"])
        self.batch_size = max(1, int(config["batch_size"]))
        self.delay_s = max(0.0, float(config["delay_s"]))
        self.max_queue = max(1, int(config["max_queue"]))
        self.keeper = (TailKeeper(config["slow_ms"], config["keep_share"])
                       if config["keep"] == "tail" else None)  # fmt: skip
        self.limits = SpanLimits(**config.get("limits", {}))
        # The most attributes a span without events or links may have and be within them.
        self._fits = self.limits.attributes if self.limits.value_length is None else -1
        self._send = send
        self._cond = threading.Condition()
        self._pending: deque[Record] = deque()
        self._pending_spans = 0  # in _pending, leaves included
        self._queued = 0  # spans ever put in the queue
        self._done = 0  # of them, exported or failed
        self._flushes: list[tuple[int, int]] = []  # (spans queued before it, seq)
        self._deadline: float | None = None  # a stop's, time.monotonic()
        self.counts = {"exported": 0, "failed": 0, "dropped": 0, "batches_failed": 0,
                       "discarded": 0}  # fmt: skip
        self._reported = 0.0

    # --- the parent's messages --------------------------------------------------------

    def run(self, stdin: BinaryIO) -> None:
        exporter = threading.Thread(target=self._export_loop, name="exai-trace-export")
        exporter.start()
        stop_s = self.timeout_s  # an orphan exports within one export timeout
        while True:
            message = read_frame(stdin)
            if message is None:
                break
            if message[0] == "spans":
                self._take(message[1])
            elif message[0] == "flush":
                with self._cond:
                    self._flushes.append((self._queued, message[1]))
                    self._cond.notify()
                self._answer_flushes()
            elif message[0] == "stop":
                stop_s = float(message[1])
                break
        deadline = time.monotonic() + stop_s
        if self.keeper is not None:
            self._take(self.keeper.release(), decided=True)
        with self._cond:
            self._deadline = deadline
            self._cond.notify()
        exporter.join()
        self.poster.close()
        self._send(("stopped", self.stats()))

    def _take(self, records: list[Record], decided: bool = False) -> None:
        """Queue ``records``; a record's leaves stay in it, each counted as a span, and
        are encoded from it (:meth:`exai.tracing.otlp.Encoder.span`)."""
        if self.keeper is not None and not decided:
            records = self.keeper.add(records)
            self.counts["discarded"] = self.keeper.spans_discarded
        spans = spans_in(records)
        with self._cond:
            room = self.max_queue - self._pending_spans
            if spans > room:
                records = expand(records)[: max(0, room)]
                self.counts["dropped"] += spans - len(records)
                spans = len(records)
            self._pending.extend(records)
            self._pending_spans += spans
            self._queued += spans
            if self._pending_spans >= self.batch_size or self._flushes:
                self._cond.notify()

    def _batch(self) -> tuple[list[Record], int]:
        """The next batch (called holding the lock): records of at most ``batch_size``
        spans, leaves counted, a record split when its leaves would pass it."""
        pending, size = self._pending, self.batch_size
        batch: list[Record] = []
        n = 0
        while pending and n < size:
            first = pending[0]
            if type(first[0]) is int:  # a call record: four spans
                k = CALL_SPANS
            else:
                leaves = first[LEAVES]
                k = 1 + len(leaves) if leaves else 1
            if n + k > size:
                parts = expand([pending.popleft()])
                batch += parts[: size - n]
                pending.extendleft(reversed(parts[size - n :]))
                n = size
                break
            batch.append(pending.popleft())
            n += k
        self._pending_spans -= n
        return batch, n

    # --- exporting ------------------------------------------------------------------

    def _export_loop(self) -> None:
        last = time.monotonic()
        while True:
            with self._cond:
                while True:
                    n, stopping = self._pending_spans, self._deadline is not None
                    if stopping and not n:
                        return
                    now = time.monotonic()
                    if n >= self.batch_size or (n and (stopping or self._flushes
                                                       or now - last >= self.delay_s)):  # fmt: skip
                        break
                    self._cond.wait(max(0.001, self.delay_s - (now - last)) if n else None)
                batch, spans = self._batch()
                deadline = self._deadline
            self._export(batch, spans, deadline)
            last = time.monotonic()

    def _encode(self, r: Record) -> bytes:
        """A record's spans, encoded: a record the span limits leave as it is (nearly
        all) straight, a call record's four in one step."""
        fits, encoder = self._fits, self.encoder
        if type(r[0]) is int:
            if len(r[FACE_ATTRIBUTES]) <= fits and len(r[CALL_ATTRIBUTES]) <= fits:
                return encoder.call(r)
            return b"".join([encoder.span(*self.limits.apply(s)) for s in standard((r,))])
        if len(r[ATTRIBUTES]) <= fits and not (r[EVENTS] or r[LINKS]):
            return encoder.span(r)
        return encoder.span(*self.limits.apply(r))

    def _export(self, batch: list[Record], spans: int, stop_deadline: float | None) -> None:
        now = time.monotonic()
        deadline = now + self.timeout_s
        if stop_deadline is not None:
            deadline = min(deadline, stop_deadline)
        ok = False
        if now < deadline:
            try:
                body = self.encoder.request([self._encode(r) for r in batch])
            except Exception as exc:  # a bug in encoding must cost a batch, not the writer
                log.warning("trace batch could not be encoded", error=repr(exc))
            else:
                ok = self.poster.post(body, deadline)
        counts = self.counts
        with self._cond:
            self._done += spans
            if ok:
                counts["exported"] += spans
            else:
                counts["failed"] += spans
                counts["batches_failed"] += 1
        if not ok and worth_logging(counts["batches_failed"]):
            log.warning("traces could not be exported; calls are not affected", spans=spans,
                        batches_failed=counts["batches_failed"],
                        error=self.poster.last_error)  # fmt: skip
        self._answer_flushes()
        if time.monotonic() - self._reported >= _REPORT_INTERVAL_S or not ok:
            self._reported = time.monotonic()
            self._send(("stats", self.stats()))

    def _answer_flushes(self) -> None:
        with self._cond:
            done = [seq for queued, seq in self._flushes if self._done >= queued]
            self._flushes = [(q, s) for q, s in self._flushes if self._done < q]
        for seq in done:
            self._send(("flushed", seq, self.stats()))

    def stats(self) -> dict[str, int]:
        return dict(self.counts)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = open(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    stdin = open(0, "rb", closefd=False)
    lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        frame = encode_frame(message)
        with lock:
            try:
                out.write(frame)
            except OSError:  # the parent is gone: nobody to tell
                pass

    config = read_config(stdin)
    if config is None:
        sys.exit(0)
    # Calls first, as the audit and session writers do: below the daemon's priority,
    # set before any thread starts (Linux applies a nice value to the calling thread,
    # and the threads it starts inherit it). Measured with 50 connections calling
    # for 30 s without pause: 14,790 traced calls/s with the writer an equal, 16,652
    # and 16,900 at nice 10, every span exported in each.
    if config.get("nice") and hasattr(os, "nice"):  # POSIX only
        os.nice(int(config["nice"]))
    from exai.logs import configure_logging

    configure_logging(config["log_format"], config["log_level"], stream=sys.stderr)
    writer = SpanWriter(config, send)
    # What exists now (modules, the scrubber, the encoder) lives as long as the process:
    # kept out of the collector's sight, which then walks only the records in flight
    # (about 1.5 us a call less at 512-span frames).
    gc.collect()
    gc.freeze()
    writer.run(stdin)
    sys.exit(0)


if __name__ == "__main__":
    main()
