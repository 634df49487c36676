"""A progress bar on stderr, with no dependency beyond the standard library.

On a terminal one line is redrawn in place at most ten times a second; when
stderr is a file or a pipe (CI logs) a plain line is written every few seconds
instead, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from exai.baseline.records import CallRecord

__all__ = ["Progress", "ProgressBar"]


class Progress:
    """What the runner reports; the base class reports nothing."""

    def start(self, total: int | None) -> None:
        """The tools are checked; ``total`` calls will be made (``None``: a duration decides)."""

    def begin(self, label: str, planned: int | None) -> None:
        """A workload starts; ``planned`` is ``None`` when a duration decides."""

    def advance(self, record: CallRecord) -> None:
        """One call finished."""

    def close(self) -> None:
        """The run is over."""


class ProgressBar(Progress):
    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.total: int | None = None
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.errors = 0
        self.label = ""
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._line_len = 0

    def start(self, total: int | None) -> None:
        self.total = total
        self.started = time.monotonic()

    def begin(self, label: str, planned: int | None) -> None:
        self.label = label
        self._draw(force=True)

    def advance(self, record: CallRecord) -> None:
        self.done += 1
        if not record.ok:
            self.errors += 1
        self._draw()

    def close(self) -> None:
        self._draw(force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        interval = 0.1 if self.tty else 5.0
        if not force and now - self._drawn_at < interval:
            return
        self._drawn_at = now
        line = self._line(now - self.started)
        if self.tty:
            pad = " " * max(0, self._line_len - len(line))
            self.stream.write(f"\r{line}{pad}")
            self._line_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _line(self, elapsed: float) -> str:
        rate = self.done / elapsed if elapsed > 0 else 0.0
        counts = f"{self.done}" + (f"/{self.total}" if self.total else "")
        tail = f"{counts} calls  {self.errors} errors  {rate:.1f}/s  {elapsed:.0f}s  {self.label}"
        if not self.total:
            return tail
        frac = min(1.0, self.done / self.total)
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        return f"[{bar}] {frac * 100:3.0f}%  {tail}"
