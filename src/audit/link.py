"""The daemon's end of one audit writer process: start it, send it frames, hear it.

A :class:`WriterLink` starts ``python -m exai.audit.writer`` with exai's
worker environment (no settings in it: the config, credentials included, goes
over the pipe), sends it its config and waits for ``ready``. Frames are
written through the event loop's pipe transport, so sending never blocks;
every message the writer sends back goes to ``on_message`` as it arrives.
:meth:`WriterLink.wait_closed` returns when the writer's output ends, which is
how the daemon learns that the writer exited, whether it was asked to or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exai.audit.wire import FrameError, WriterConfig, encode_frame, frame_length, parse_frame
from exai.subprocesses import worker_environment

__all__ = ["WriterFailed", "WriterLink"]

# -P: the daemon's working directory is not put on the writer's import path.
WRITER_COMMAND = (sys.executable, "-P", "-m", "exai.audit.writer")


class WriterFailed(RuntimeError):
    """The writer process could not start, or said why it could not."""


class WriterLink:
    def __init__(self, config: WriterConfig, on_message: Callable[[tuple[Any, ...]], None]) -> None:
        self._config = config
        self._on_message = on_message
        self._process: asyncio.subprocess.Process | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[dict[str, Any]] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    async def start(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Start the writer; its ``ready`` status, or :class:`WriterFailed`."""
        workdir = Path(self._config.outbox_path).parent
        workdir.mkdir(parents=True, exist_ok=True)
        self._process = await asyncio.create_subprocess_exec(
            *WRITER_COMMAND, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=worker_environment(), cwd=workdir,
        )  # fmt: skip
        self._ready = asyncio.get_running_loop().create_future()
        self._reader_task = asyncio.create_task(self._read(), name="exai-audit-writer-link")
        self.send(encode_frame(self._config.to_message()))
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(self._ready)
        except BaseException:
            self.kill()
            await self.wait_closed()
            raise

    def send(self, frame: bytes) -> None:
        """Queue ``frame`` for the writer; a writer that is gone gets nothing."""
        stdin = self._process.stdin if self._process else None
        if stdin is not None and not stdin.is_closing():
            stdin.write(frame)

    async def drain(self) -> None:
        stdin = self._process.stdin if self._process else None
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError):
                await stdin.drain()

    def close_input(self) -> None:
        """End the writer's input: after what was sent, it stores, closes and exits."""
        stdin = self._process.stdin if self._process else None
        if stdin is not None and not stdin.is_closing():
            stdin.close()

    def kill(self) -> None:
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    async def wait_closed(self) -> int | None:
        """Wait until the writer's output ends and it has exited; its exit code."""
        if self._reader_task is not None:
            await asyncio.shield(self._reader_task)
        if self._process is None:
            return None
        return await self._process.wait()

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        try:
            while True:
                try:
                    header = await stdout.readexactly(4)
                    message = parse_frame(await stdout.readexactly(frame_length(header)))
                except asyncio.IncompleteReadError:
                    break
                if message[0] == "ready" and self._ready and not self._ready.done():
                    self._ready.set_result(message[1])
                elif message[0] == "fatal" and self._ready and not self._ready.done():
                    self._ready.set_exception(WriterFailed(str(message[1])))
                else:
                    self._on_message(message)
        except FrameError as exc:
            self.kill()
            self._fail(WriterFailed(f"audit writer sent a bad frame: {exc}"))
        finally:
            self._fail(WriterFailed("the audit writer exited before it was ready"))

    def _fail(self, exc: WriterFailed) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(exc)
            self._ready.exception()  # retrieved: start() may no longer be waiting
