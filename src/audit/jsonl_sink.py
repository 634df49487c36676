"""The ``jsonl`` sink: one event per line in a size-rotated file.

``audit.jsonl`` rolls over to ``audit.jsonl.1`` ... ``.N`` past ``max_bytes``,
the oldest falling off, like ``logging.handlers.RotatingFileHandler``. Each
batch is written and fsynced before it counts as accepted. A file cannot
ignore duplicates cheaply, so delivery here is at least once: a crash between
the write and the outbox's acknowledgement writes that batch again, and readers
deduplicate on ``event_id``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exai.audit.sinks import SinkUnavailable

__all__ = ["JsonlSink"]


class JsonlSink:
    name = "jsonl"

    def __init__(self, path: Path, *, max_bytes: int = 64 * 1024 * 1024, backups: int = 5) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups

    async def open(self) -> None:
        await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        lines = "".join(
            json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
            for event in events
        ).encode()
        try:
            await asyncio.to_thread(self._write, lines)
        except OSError as exc:
            raise SinkUnavailable(f"{type(exc).__name__}: {exc}") from exc

    def _write(self, data: bytes) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(data) > self.max_bytes:
            self._rotate()
        with open(self.path, "ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def _rotate(self) -> None:
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        if self.backups > 0:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()

    async def close(self) -> None:
        return None
