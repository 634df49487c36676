"""The traced process's end of its span writer: a deque on the call path, a pipe off it.

A span that ends appends its record to a deque (:attr:`WriterLink.add` is the
deque's own ``append``: no Python call, no lock, no I/O, no encoding); a
shipping thread, and it alone, takes what waits every ``interval_s`` and
writes it to the writer process's stdin as marshalled frames of
``batch_size`` records. The write blocks that thread, never a call: the pipe
is the backpressure. A second thread reads what the writer reports (its
counts, a flush done, its stop).

Threads rather than event-loop tasks, because tracing is set up at the edge
before any event loop runs, and spans may end on any thread.

Nothing is dropped below ``max_queue`` records waiting here; past it (checked
at each pass, so by at most one interval's spans) the newest are dropped and
counted. A writer that exits while the process runs is
started again (the spans of the frame that failed are counted lost).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from itertools import islice
from typing import Any, Final

from exai.logs import get_logger
from exai.subprocesses import worker_environment
from exai.tracing.export import ExportStats
from exai.tracing.records import Record, spans_in
from exai.tracing.wire import FrameError, config_frame, encode_frame, read_frame
from exai.worker_frames import widen_pipe

__all__ = ["WriterLink"]

log = get_logger("exai.tracing")

# -P: the working directory is not put on the writer's import path.
WRITER_COMMAND: Final = (sys.executable, "-P", "-m", "exai.tracing.writer")
_RESTART_AFTER_S: Final = 1.0
_STOP_GRACE_S: Final = 0.5  # after the deadline, for the writer to say it stopped


class WriterLink:
    def __init__(
        self,
        config: dict[str, Any],
        *,
        batch_size: int,
        max_queue: int,
        interval_s: float = 0.02,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.stats = ExportStats()
        self._config = config
        # Never this process's own: the writer gets its configuration over the pipe
        # and no secret in its environment (exai.subprocesses).
        self._environment = dict(environment if environment is not None else worker_environment())
        self._batch = max(1, batch_size)
        self._max_queue = max(1, max_queue)
        self._interval_s = interval_s
        self._queue: deque[Record] = deque()
        self._wake = threading.Event()
        self._control: deque[tuple[Any, ...]] = deque()
        self._flushes: dict[int, threading.Event] = {}
        self._stopped = threading.Event()
        self._closing = False
        self._seq = 0
        self._shipped = 0
        self._dropped = 0  # here, queue full
        self._lost = 0  # in frames a dead writer did not take
        self._base: dict[str, int] = {}  # counts of writers that exited
        self._last: dict[str, int] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self.add = self._queue.append
        self._start_writer()
        self._shipper = threading.Thread(target=self._ship_loop, name="exai-trace-ship",
                                         daemon=True)  # fmt: skip
        self._shipper.start()

    # --- flush and stop -----------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """True once every span ended before this call is exported or failed."""
        self._seq += 1
        done = self._flushes[self._seq] = threading.Event()
        self._control.append(("flush", self._seq))
        self._wake.set()
        return done.wait(timeout_s)

    def stop(self, timeout_s: float | None = None) -> bool:
        """Hand over what is queued and let the writer export it, within ``timeout_s``
        (the export timeout unless given); True if the writer finished by then."""
        if timeout_s is None:
            timeout_s = float(self._config["post"]["timeout_s"])
        deadline = time.monotonic() + timeout_s
        self._control.append(("stop", deadline))
        self._closing = True
        self._wake.set()
        self._shipper.join(max(0.0, deadline - time.monotonic()))
        finished = self._stopped.wait(max(0.0, deadline - time.monotonic()) + _STOP_GRACE_S)
        process = self._process
        if process is not None:
            if not finished:
                process.kill()
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
        self._apply({})
        return finished

    # --- the shipping thread -------------------------------------------------------------

    def _ship_loop(self) -> None:
        while True:
            self._wake.wait(self._interval_s)
            self._wake.clear()
            self._ship()
            while self._control:
                message = self._control.popleft()
                if message[0] == "stop":
                    remaining = max(0.0, message[1] - time.monotonic())
                    self._write(encode_frame(("stop", remaining)), 0)
                    self._close_input()
                    return
                self._write(encode_frame(message), 0)

    def _ship(self) -> None:
        queue = self._queue
        while len(queue) > self._max_queue:
            self._dropped += spans_in((queue.pop(),))
        while queue:
            # Taken in one step (popleft called from C until the batch is full), as the
            # span count below is made: on this thread every step holds the interpreter
            # lock the event loop waits for.
            records = list(islice(iter(queue.popleft, None), min(len(queue), self._batch)))
            spans = spans_in(records)
            self._shipped += spans
            self.stats.spans_ended = self._shipped + self._dropped
            self._write(encode_frame(("spans", records)), spans)

    def _write(self, frame: bytes, spans: int) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            process = self._restart()
        stdin = process.stdin if process is not None else None
        try:
            if stdin is None:
                raise BrokenPipeError
            stdin.write(frame)
            stdin.flush()
        except (OSError, ValueError):
            self._lost += spans
            self._apply({})

    def _close_input(self) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass

    # --- the writer process --------------------------------------------------------------

    def _start_writer(self) -> None:
        process = subprocess.Popen(WRITER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=self._environment, close_fds=True)  # fmt: skip
        self._process = process
        self._started_at = time.monotonic()
        assert process.stdin is not None and process.stdout is not None
        # A frame of spans is about 100 KiB (512 records); in Linux's default 64 KiB pipe
        # each one blocked the shipping thread and woke both ends several times.
        widen_pipe(process.stdin.fileno())
        process.stdin.write(config_frame(self._config))
        process.stdin.flush()
        threading.Thread(target=self._read_loop, args=(process,), name="exai-trace-reports",
                         daemon=True).start()  # fmt: skip

    def _restart(self) -> subprocess.Popen[bytes] | None:
        if time.monotonic() - self._started_at < _RESTART_AFTER_S:
            return None
        for key, value in self._last.items():
            self._base[key] = self._base.get(key, 0) + value
        self._last = {}
        log.error("trace writer exited; starting it again", unexported=self._lost)
        try:
            self._start_writer()
        except OSError as exc:
            log.error("trace writer did not start", error=str(exc))
            return None
        return self._process

    def _read_loop(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        try:
            while True:
                message = read_frame(process.stdout)
                if message is None:
                    break
                if message[0] == "stats":
                    self._apply(message[1], process)
                elif message[0] == "flushed":
                    self._apply(message[2], process)
                    done = self._flushes.pop(message[1], None)
                    if done is not None:
                        done.set()
                elif message[0] == "stopped":
                    self._apply(message[1], process)
                    self._stopped.set()
        except (FrameError, OSError, ValueError) as exc:
            log.error("trace writer sent a bad frame", error=str(exc))
            process.kill()

    def _apply(self, counts: dict[str, int], process: Any = None) -> None:
        if process is not None and process is not self._process:
            return  # a writer that was replaced
        if counts:
            self._last = counts
        base, last = self._base, self._last

        def total(key: str) -> int:
            return base.get(key, 0) + last.get(key, 0)

        stats = self.stats
        dropped = self._dropped + total("dropped")
        stats.spans_ended = self._shipped + self._dropped
        stats.spans_exported = total("exported")
        stats.spans_failed = total("failed") + dropped + self._lost
        stats.batches_failed = total("batches_failed")
        stats.spans_dropped = dropped
        stats.spans_discarded = total("discarded")
