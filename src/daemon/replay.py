"""What a call sent again under a ``request_id`` it already used gets back.

A client that lost its connection re-sends its calls with the same
``request_id`` in the same session; the daemon answers a call that already
finished from :class:`ReplayCache` instead of running it twice. Two rules keep
that safe:

* an answer is only ever given to the call that produced it. Each entry keeps
  the call's :func:`call_fingerprint` (its tool and arguments), and the same id
  sent for a different call is refused, never answered with the earlier result.
  Most calls are never retried, so a call whose frame is small keeps the frame's
  text instead (which exists already) and its fingerprint is derived from it
  only when a call arrives under the same id;
* the cache is bounded: entries age out after the replay window, each session
  keeps at most ``max_entries``, and all sessions together at most ``max_bytes``,
  the oldest entry going first whichever session holds it. A session that ends
  takes its entries with it.

A result that has gone from the cache is not lost for the tools that matter: a
conversation turn is also kept in the conversation store under the same key and
fingerprint (see :func:`exai.tools.turn.run_turn`).

Nothing here reads a clock: every method is given ``now`` (``time.monotonic()``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from exai.protocol import CallToolFrame, parse_client_frame

__all__ = [
    "ENTRY_OVERHEAD_BYTES",
    "KEEP_REQUEST_MAX_CHARS",
    "ReplayCache",
    "ReplayEntry",
    "call_fingerprint",
    "frame_fingerprint",
]

# What an entry costs beyond its result's bytes: the request_id and fingerprint
# strings, the bytes object's header, the tuples and the slots in two dicts
# (about 440 bytes, measured with tracemalloc). Counting it keeps the byte bound
# honest when the results are small and many.
ENTRY_OVERHEAD_BYTES = 512

# Frames up to this size are kept whole instead of fingerprinted when their call
# finishes; a larger one is fingerprinted then, so the cache holds its digest,
# not its text.
KEEP_REQUEST_MAX_CHARS = 4096


def _canonical_encoder() -> Callable[[Any], str]:
    """Canonical JSON: equal arguments give the same text whatever their key order.

    Every call is fingerprinted, so the C encoder is built once and reused where
    the json module has one (JSONEncoder.encode builds it again on each call,
    which costs more than the encoding of typical arguments).
    """
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if c_make_encoder is None:  # pragma: no cover - CPython ships the C encoder
        return encoder.encode
    make = c_make_encoder(None, encoder.default, encode_basestring, None, ":", ",", True,
                          False, True)  # fmt: skip
    return lambda value: "".join(make(value, 0))


_CANONICAL = _canonical_encoder()


def call_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """A digest of what a call asks for (its tool and arguments), stable across processes."""
    encoded = _CANONICAL(arguments).encode("utf-8", "surrogatepass")
    return hashlib.sha256(tool.encode() + b"\x00" + encoded).hexdigest()


def frame_fingerprint(raw: str) -> str:
    """The fingerprint of the ``call_tool`` frame whose text is ``raw``."""
    frame = parse_client_frame(raw)
    assert isinstance(frame, CallToolFrame)
    return call_fingerprint(frame.name, frame.arguments)


class ReplayEntry(NamedTuple):
    """A kept result, as :meth:`ReplayCache.get` hands it out."""

    stored_at: float
    fingerprint_known: str | None  # None: derived from ``request`` when asked for
    request: str | None  # the call_tool frame as received, when it was small
    # The call_tool_res as it was sent: serialized once, and bytes give the
    # garbage collector nothing to walk however many results are kept.
    result: bytes

    @property
    def fingerprint(self) -> str:
        if self.fingerprint_known is not None:
            return self.fingerprint_known
        assert self.request is not None
        return frame_fingerprint(self.request)


# How an entry is kept: a plain tuple of (stored_at, fingerprint_known, request,
# result). The collector stops tracking a tuple of strings, bytes and floats after
# one look, and never one of a tuple subclass (a NamedTuple), which it would then
# walk in every collection for as long as the entry is kept.
_Kept = tuple[float, str | None, str | None, bytes]


class ReplayCache:
    """Finished calls' results by (session, request_id), bounded in age, count and bytes."""

    def __init__(self, window_s: float, max_entries: int, max_bytes: int) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        # Entries by session, each session's oldest first; and every entry's size,
        # oldest first across sessions. Both are insertion-ordered dicts: a key is
        # deleted before it is set again, so the first key is always the oldest.
        self._sessions: dict[str, dict[str, _Kept]] = {}
        self._order: dict[tuple[str, str], int] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._order)

    def put(
        self,
        session_id: str,
        request_id: str,
        fingerprint: str | None,
        result: bytes,
        now: float,
        request: str | None = None,
    ) -> None:
        """Keep ``result`` for replay; older entries make room when a bound is reached.

        Give the call's ``fingerprint``, or None and the ``request`` frame's text.
        """
        if (session_id, request_id) in self._order:  # run again after its result expired
            self._drop(session_id, request_id)
        entries = self._sessions.get(session_id)
        if entries is None:
            entries = self._sessions[session_id] = {}
        entries[request_id] = (now, fingerprint, request, result)
        size = len(result) + ENTRY_OVERHEAD_BYTES
        if request is not None:
            size += len(request)
        self._order[(session_id, request_id)] = size
        self.bytes += size
        if len(entries) > self.max_entries:
            self._drop(session_id, next(iter(entries)))
        order = self._order
        while self.bytes > self.max_bytes and order:
            self._drop(*next(iter(order)))

    def get(self, session_id: str, request_id: str, now: float) -> ReplayEntry | None:
        """The entry for this call, if it finished within the replay window."""
        entries = self._sessions.get(session_id)
        entry = None if entries is None else entries.get(request_id)
        if entry is None or now - entry[0] > self.window_s:
            return None
        return ReplayEntry(*entry)

    def expire(self, now: float) -> int:
        """Drop every entry older than the replay window; return how many went."""
        order, gone = self._order, 0
        while order:
            session_id, request_id = key = next(iter(order))
            if now - self._sessions[session_id][request_id][0] <= self.window_s:
                break
            self._drop(*key)
            gone += 1
        return gone

    def forget(self, session_id: str) -> None:
        """Drop everything a session kept (the session has ended)."""
        for request_id in list(self._sessions.get(session_id, ())):
            self._drop(session_id, request_id)

    def _drop(self, session_id: str, request_id: str) -> None:
        self.bytes -= self._order.pop((session_id, request_id))
        entries = self._sessions[session_id]
        del entries[request_id]
        if not entries:
            del self._sessions[session_id]
