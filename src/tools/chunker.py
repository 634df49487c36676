"""Cut streamed model text into readable ``stream_chunk`` pieces.

Token-sized deltas make poor frames: too many of them, and a client that shows
them as they come flickers through half-words. :class:`StreamChunker` gathers
deltas and releases a chunk at the best boundary past ``min_chars``: a paragraph
break; failing that, once half of ``max_chars`` is waiting, the end of a sentence
or a line; failing that, a space once ``max_chars`` is reached. It never cuts
inside a fenced code block (```), so a client rendering Markdown chunk by chunk
never sees half a fence; a fence longer than ``max_chars`` is released whole
when it closes.
"""

from __future__ import annotations

import re

__all__ = ["StreamChunker"]

# Latin sentence ends need the following space; CJK full stops (U+3002, U+FF01, U+FF1F) stand alone.
_SENTENCE_END = re.compile("[.!?][\"')\\]]*\\s|[\u3002\uff01\uff1f][\u300d\u300f\u201d\uff09]*")
_FENCE = "```"


class StreamChunker:
    def __init__(self, min_chars: int = 200, max_chars: int = 2000) -> None:
        if max_chars < min_chars:
            raise ValueError("max_chars must be at least min_chars")
        self.min_chars = min_chars
        self.max_chars = max_chars
        # Past min_chars a paragraph break is taken at once; a sentence or line end
        # only once this much is waiting, so paragraphs win when they come soon.
        self._patience = max(min_chars, max_chars // 2)
        self._buf = ""

    def feed(self, text: str) -> list[str]:
        """Add streamed text; return the chunks that are ready, possibly none."""
        self._buf += text
        out: list[str] = []
        while True:
            cut = self._cut_point()
            if cut is None:
                return out
            out.append(self._buf[:cut])
            self._buf = self._buf[cut:]

    def flush(self) -> list[str]:
        """Everything still held, at the end of the stream."""
        rest, self._buf = self._buf, ""
        return [rest] if rest else []

    def _cut_point(self) -> int | None:
        buf = self._buf
        if len(buf) < self.min_chars:
            return None
        safe = _outside_fences(buf)
        if not safe:
            return None
        limit = min(len(buf), self.max_chars)
        cut = _paragraph(buf, self.min_chars, limit, safe)
        if cut is None and len(buf) >= self._patience:
            cut = _sentence(buf, self.min_chars, limit, safe) or _line(
                buf, self.min_chars, limit, safe
            )
        if cut is not None:
            return cut
        if len(buf) >= self.max_chars:
            return _space(buf, self.max_chars, safe)
        return None


def _outside_fences(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` (start, end) where a cut would not fall inside a code fence."""
    spans = []
    pos = 0
    inside = False
    start = 0
    while True:
        idx = text.find(_FENCE, pos)
        if idx < 0:
            break
        if not inside:
            spans.append((start, idx))
        else:
            # The fence closes at the end of its line.
            eol = text.find("\n", idx)
            if eol < 0:
                return spans  # closing fence not complete yet
            start = eol + 1
            pos = start
            inside = False
            continue
        inside = True
        pos = idx + len(_FENCE)
    if not inside:
        spans.append((start, len(text)))
    return spans


def _allowed(cut: int, safe: list[tuple[int, int]]) -> bool:
    return any(lo < cut <= hi for lo, hi in safe) or any(cut == lo for lo, _ in safe if lo > 0)


def _last_match(positions: list[int], lo: int, hi: int, safe: list[tuple[int, int]]) -> int | None:
    for cut in reversed(positions):
        if lo <= cut <= hi and _allowed(cut, safe):
            return cut
    return None


def _paragraph(buf: str, lo: int, hi: int, safe: list[tuple[int, int]]) -> int | None:
    return _last_match([m.end() for m in re.finditer(r"\n\s*\n", buf[: hi + 2])], lo, hi, safe)


def _sentence(buf: str, lo: int, hi: int, safe: list[tuple[int, int]]) -> int | None:
    return _last_match([m.end() for m in _SENTENCE_END.finditer(buf[: hi + 1])], lo, hi, safe)


def _line(buf: str, lo: int, hi: int, safe: list[tuple[int, int]]) -> int | None:
    return _last_match([m.end() for m in re.finditer(r"\n", buf[:hi])], lo, hi, safe)


def _space(buf: str, hi: int, safe: list[tuple[int, int]]) -> int | None:
    cut = _last_match([m.end() for m in re.finditer(r" ", buf[:hi])], 1, hi, safe)
    if cut is not None:
        return cut
    return hi if _allowed(hi, safe) else None
