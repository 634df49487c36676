"""The frames exai's worker processes (the audit writer, the span writer) and the
process that started them exchange over pipes.

A frame is a 4-byte big-endian length, then a :mod:`marshal` dump of a tuple whose
first item names the message: marshal is the cheapest encoding the interpreter has
for plain values, and both ends are the same exai on the same interpreter, so
nothing else ever reads these bytes. Each worker's protocol (its messages, the
marshal version it writes) is its own module's: :mod:`exai.audit.wire`,
:mod:`exai.tracing.wire`.
"""

from __future__ import annotations

import marshal
import struct
from typing import Any, Final

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FRAME_HEADER", "MAX_FRAME_BYTES", "FrameError", "frame_length", "parse_frame", "widen_pipe",
]  # fmt: skip

FRAME_HEADER: Final = struct.Struct(">I")
MAX_FRAME_BYTES: Final = 1 << 30


class FrameError(ValueError):
    """Bytes on a worker's pipe that are not a frame of its protocol."""


def frame_length(header: bytes) -> int:
    """The payload length a 4-byte frame header announces."""
    (length,) = FRAME_HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes announced")
    return int(length)


def parse_frame(payload: bytes) -> tuple[Any, ...]:
    """The message in a frame's payload; :class:`FrameError` if it is not one."""
    try:
        message = marshal.loads(payload)
    except (EOFError, ValueError, TypeError) as exc:
        raise FrameError(f"unreadable frame: {exc}") from exc
    if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
        raise FrameError("a frame must hold a tuple that starts with its name")
    return message


def widen_pipe(fd: int, size: int = 1 << 20) -> None:
    """The pipe at ``fd`` made ``size`` bytes long where the system allows it (Linux,
    up to ``/proc/sys/fs/pipe-max-size``); as it was elsewhere. A worker's frames are
    often larger than Linux's default 64 KiB, which would block the writing end and
    wake both ends several times a frame."""
    setting = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setting is not None:
        try:
            fcntl.fcntl(fd, setting, size)
        except OSError:
            pass
