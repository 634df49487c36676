"""Whole text frames read by exai, while websockets' parser waits for the next frame.

After the ``hello``, with no extension on, a whole text frame that arrives while
websockets' parser waits for the first byte of a frame is read here (unmasked
and checked as websockets checks it), and handed over as a message: websockets'
generator-based parser takes 3.4 µs a message in a loop, this 0.6 µs.
Everything else (control frames, fragments, a frame cut across reads, an error
to close on) is websockets' to parse.

Knowing when the parser waits at a frame's boundary needs websockets' private
internals: the generators it is suspended in (``Protocol.parse`` waiting in
``StreamReader.at_eof``), the size of a fragmented message under way
(``Protocol.cur_size``) and the stream reader's ``buffer``. They are pinned to the
websockets versions tested (pyproject.toml) and guarded by
``tests/ws/test_private_api.py``; see docs/dependencies.md. Any other shape (a
websockets that renamed them, the parser replaced after a close) reads as "not
waiting", so websockets parses: slower, never wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets import frames as ws_frames
from websockets.protocol import Protocol, State
from websockets.streams import StreamReader

__all__ = ["take_messages", "waits_for_a_frame"]

# websockets' own unmasking (its C speedup when built, else its pure-Python one).
_apply_mask = ws_frames.apply_mask
_FRAME_LOOP = Protocol.parse.__code__
_AT_A_BOUNDARY = StreamReader.at_eof.__code__


def waits_for_a_frame(protocol: Any) -> bool:
    """Whether websockets' parser waits for the first byte of a frame, nothing buffered.

    Read from the generators it is suspended in: the frame loop, waiting in the
    stream reader's end-of-stream check (where it waits only with an empty
    buffer). Mid-frame it waits in a read of the frame's bytes instead, and the
    buffer may be empty there too. Any other shape (another websockets version,
    the parser replaced after a close) reads as not waiting: websockets parses.
    """
    if protocol.reader.buffer or protocol.cur_size is not None or protocol.state is not State.OPEN:
        return False
    outer, inner = None, protocol.parser
    while inner.gi_yieldfrom is not None:
        outer, inner = inner, inner.gi_yieldfrom
    return inner.gi_code is _AT_A_BOUNDARY and outer is not None and outer.gi_code is _FRAME_LOOP


def take_messages(protocol: Any, data: bytes, handler: Callable[[str], None]) -> bytes:
    """Hand each whole text message at the start of ``data`` to ``handler``, read by
    exai; return the rest (from the first byte that is anything else) for
    websockets to parse.

    Called only while websockets' parser waits for the first byte of a frame with
    nothing buffered (:func:`waits_for_a_frame`), so ``data`` starts at a frame's
    first byte. A frame is read here only when it is an unfragmented, masked text
    frame with no reserved bit, within the size limit, complete in ``data`` and
    valid UTF-8: what websockets would accept and hand over as one message, byte
    for byte. Anything else (a control or binary frame, a fragment, a frame cut
    short, an error to close on) goes to websockets from its first byte, so its
    checks and answers are unchanged; once it holds part of a frame, the direct
    path waits until it has parsed that frame whole.
    """
    max_size = protocol.max_size
    size = len(data)
    pos = 0
    while size - pos >= 6 and protocol.state is State.OPEN:
        if data[pos] != 0x81:  # FIN and the text opcode, no reserved bit
            break
        length = data[pos + 1] ^ 0x80  # the mask bit must be set
        start = pos + 2
        if length == 126:
            length = int.from_bytes(data[start : start + 2], "big")
            start += 2
        elif length == 127:
            length = int.from_bytes(data[start : start + 8], "big")
            start += 8
        elif length > 127:
            break  # not masked: websockets fails the connection
        end = start + 4 + length
        if end > size or (max_size is not None and length > max_size):
            break
        try:
            text = str(_apply_mask(data[start + 4 : end], data[start : start + 4]), "utf-8")
        except UnicodeDecodeError:
            break
        pos = end
        handler(text)
    return data[pos:] if pos else data
