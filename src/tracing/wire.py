"""The pipe between a traced process and its span writer: frames and messages.

A frame is a 4-byte big-endian length, then a :mod:`marshal` dump of a tuple
whose first item names the message (the audit writer's format: marshal is the
cheapest encoding the interpreter has for plain values, and both ends are the
same exai on the same interpreter). The first frame, the writer's
configuration, is a pickle instead, because it carries the credential
scrubber the edge handed in (a callable); credentials travel only through
this pipe, never in argv or the environment.

To the writer: ``("config", dict)`` (pickled, once), ``("spans", records)``,
``("flush", seq)``, ``("stop", timeout_s)``.

From the writer: ``("stats", dict)`` when its counts change,
``("flushed", seq, dict)`` once every span sent before ``flush`` is exported
or failed, ``("stopped", dict)``.
"""

from __future__ import annotations

import marshal
import pickle
from typing import Any, BinaryIO, Final

from exai.worker_frames import FRAME_HEADER, FrameError, frame_length, parse_frame

__all__ = ["FrameError", "config_frame", "encode_frame", "read_config", "read_frame"]

# Version 4, as the audit trail's and the session writer's pipes: it shares repeated
# objects by reference (3 does too) and writes short strings and tuples in fewer
# bytes. For a call's records, counted with callgrind: 13,300 instructions a call
# to dump against 15,100 with 3 (the hand-over thread, holding the daemon's
# interpreter lock), 25,900 against 26,400 to load, 5% fewer bytes.
_MARSHAL_VERSION: Final = 4


def encode_frame(message: tuple[Any, ...]) -> bytes:
    payload = marshal.dumps(message, _MARSHAL_VERSION)
    return FRAME_HEADER.pack(len(payload)) + payload


def config_frame(config: dict[str, Any]) -> bytes:
    payload = pickle.dumps(("config", config))
    return FRAME_HEADER.pack(len(payload)) + payload


def _payload(stream: BinaryIO) -> bytes | None:
    header = _read(stream, 4)
    if header is None:
        return None
    payload = _read(stream, frame_length(header))
    if payload is None:
        raise FrameError("the pipe ended inside a frame")
    return payload


def read_frame(stream: BinaryIO) -> tuple[Any, ...] | None:
    """The next message on ``stream``; None at its end."""
    payload = _payload(stream)
    return None if payload is None else parse_frame(payload)


def read_config(stream: BinaryIO) -> dict[str, Any] | None:
    """The first frame: the writer's configuration (None: the pipe ended first).
    Only the process that started the writer writes to this pipe."""
    payload = _payload(stream)
    if payload is None:
        return None
    message = pickle.loads(payload)
    if not (isinstance(message, tuple) and len(message) == 2 and message[0] == "config"):
        raise FrameError("the first frame must be the writer's config")
    return dict(message[1])


def _read(stream: BinaryIO, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
