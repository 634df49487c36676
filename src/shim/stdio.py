"""MCP's stdio transport on asyncio pipes: newline-delimited JSON-RPC on fds 0 and 1.

The SDK's ``stdio_server`` reads stdin on a worker thread. That costs a thread
hop per message, and a thread blocked in ``read`` cannot be interrupted, so a
shim whose parent died while someone still holds its stdin open could not
exit. Reading and writing the pipes on the event loop avoids both. When stdin
or stdout is not a pipe, socket or terminal (a regular file, in some test
harnesses) the SDK's transport is used instead.

While serving, fd 0 reads ``/dev/null`` and fd 1 points at stderr, so nothing
else in the process (a stray ``print``, a child process) can write into the
MCP stream; the wire uses private duplicates of the original descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from exai.logs import get_logger

__all__ = ["stdio_streams"]

log = get_logger("exai.shim")

_MAX_LINE = 64 * 1024 * 1024
# A few messages of slack each way: a rendezvous (0) costs extra loop turns per message,
# while a bound keeps backpressure from a slow reader.
_BUFFERED = 32

Streams = tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[SessionMessage]]


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[Any]:
    """Yield ``(read_stream, write_stream)`` for ``Server.run`` over this process's stdio."""
    try:
        pipes = await _Pipes.open()
    except (OSError, ValueError) as exc:
        log.debug("stdio is not a pipe; using the SDK transport", reason=str(exc))
        async with stdio_server() as streams:
            yield streams
        return
    try:
        async with pipes.serve() as streams:
            yield streams
    finally:
        pipes.restore()


class _Pipes:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        read_transport: asyncio.BaseTransport,
        writer: asyncio.StreamWriter,
        saved: dict[int, int],
    ) -> None:
        self.reader = reader
        self.read_transport = read_transport
        self.writer = writer
        self._saved = saved

    @classmethod
    async def open(cls) -> _Pipes:
        loop = asyncio.get_running_loop()
        wire_in = os.fdopen(os.dup(0), "rb", 0)
        wire_out = os.fdopen(os.dup(1), "wb", 0)
        read_transport: asyncio.BaseTransport | None = None
        try:
            reader = asyncio.StreamReader(limit=_MAX_LINE)
            read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), wire_in
            )
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, wire_out
            )
        except (OSError, ValueError):
            if read_transport is not None:
                read_transport.close()
            wire_in.close()
            wire_out.close()
            raise
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        saved = {0: os.dup(0), 1: os.dup(1)}
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        return cls(reader, read_transport, writer, saved)

    def restore(self) -> None:
        for fd, saved in self._saved.items():
            with contextlib.suppress(OSError):
                os.dup2(saved, fd)
                os.close(saved)
        self._saved.clear()

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[Streams]:
        to_server, read_stream = anyio.create_memory_object_stream[Any](_BUFFERED)
        write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](_BUFFERED)
        reading = asyncio.create_task(self._read(to_server))
        writing = asyncio.create_task(self._write(from_server))
        try:
            yield read_stream, write_stream
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            write_stream.close()
            try:
                async with asyncio.timeout(2.0):
                    await writing
            except TimeoutError:
                writing.cancel()
            self.read_transport.close()
            self.writer.close()

    async def _read(self, sink: MemoryObjectSendStream[Any]) -> None:
        async with sink:
            while True:
                try:
                    line = await self.reader.readline()
                except ValueError as exc:  # a line longer than _MAX_LINE
                    await sink.send(exc)
                    continue
                if not line:
                    return  # EOF: the client closed our stdin
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    await sink.send(exc)
                    continue
                await sink.send(SessionMessage(message))

    async def _write(self, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with source:
            async for item in source:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                if self.writer.is_closing():
                    return
                self.writer.write(data.encode() + b"\n")
                await self.writer.drain()
