"""Tail-based keeping: every slow or failed call's whole trace, a share of the rest.

With ``EXAI_TRACE_KEEP=tail`` the writer holds each trace's spans until the
trace's local root ends (the span with no parent in this process: the face's
span of a call, whose parent, if any, is the caller's), and then keeps the
whole trace or none of it:

- kept if any of its spans failed (status ``ERROR``), or if the root took at
  least ``slow_ms``;
- otherwise kept if its trace id falls in ``share`` of the id space (the
  low 64 bits against ``share * 2**64``: the rule of OpenTelemetry's
  ``TraceIdRatioBased`` sampler, so every process keeping by the same share
  keeps the same traces).

Spans that end after their root follow the decision made for it (remembered
for the last :data:`_DECIDED_MAX` traces). At most ``max_held`` spans are held:
past it the oldest trace is decided by what is known of it so far (a failure
seen keeps it). Pure: no clock, no I/O; the writer calls it.

It takes records as the writer does, a call record (four spans that ended
well: a face's span nested into its call's, each with its one leaf) as one:
decided as a whole, without being made into its spans first, and counted as
four spans held or discarded.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from exai.tracing.records import (
    CALL_END,
    CALL_PARENT_ID,
    CALL_PARENT_REMOTE,
    CALL_START,
    CALL_TRACE_ID,
    END,
    PARENT_ID,
    PARENT_REMOTE,
    START,
    STATUS_CODE,
    TRACE_ID,
    Record,
    spans_in,
)

__all__ = ["TailKeeper"]

_ERROR: Final = 2  # StatusCode.ERROR
_DECIDED_MAX: Final = 65536
_ID_SPACE: Final = 1 << 64


class TailKeeper:
    def __init__(self, slow_ms: float, share: float, max_held: int = 65536) -> None:
        self.slow_ns = int(slow_ms * 1e6)
        self.bound = round(share * _ID_SPACE)
        self.max_held = max_held
        self._held: OrderedDict[int, list[Record]] = OrderedDict()
        self._failed: set[int] = set()
        self._decided: OrderedDict[int, bool] = OrderedDict()
        self.held = 0
        self.traces_kept = 0
        self.traces_discarded = 0
        self.spans_discarded = 0

    def add(self, records: list[Record]) -> list[Record]:
        """Take ended spans; return the spans to export now (of traces kept)."""
        out: list[Record] = []
        for r in records:
            if type(r[0]) is int:  # a call record: four spans that ended well, as one
                trace_id, root = r[CALL_TRACE_ID], not r[CALL_PARENT_ID] or r[CALL_PARENT_REMOTE]
                took = r[CALL_END] - r[CALL_START]
            else:
                trace_id, root = r[TRACE_ID], not r[PARENT_ID] or r[PARENT_REMOTE]
                took = r[END] - r[START]
                if r[STATUS_CODE] == _ERROR:
                    self._failed.add(trace_id)
            decided = self._decided.get(trace_id)
            if decided is not None:
                self._count(out, [r], decided)
                continue
            if root:  # the local root (the face's span of a call): decide now
                spans = self._held.pop(trace_id, [])
                self.held -= spans_in(spans)
                spans.append(r)
                self._decide(out, trace_id, spans, took >= self.slow_ns)
                continue
            self._held.setdefault(trace_id, []).append(r)
            self.held += spans_in((r,))
        while self.held > self.max_held:
            trace_id, spans = self._held.popitem(last=False)
            self.held -= spans_in(spans)
            self._decide(out, trace_id, spans, False)
        return out

    def release(self) -> list[Record]:
        """Decide every trace still held (at a stop) by what is known of it."""
        out: list[Record] = []
        while self._held:
            trace_id, spans = self._held.popitem(last=False)
            self._decide(out, trace_id, spans, False)
        self.held = 0
        return out

    def _decide(self, out: list[Record], trace_id: int, spans: list[Record], slow: bool) -> None:
        keep = slow or trace_id in self._failed or (trace_id & (_ID_SPACE - 1)) < self.bound
        self._failed.discard(trace_id)
        self._decided[trace_id] = keep
        if len(self._decided) > _DECIDED_MAX:
            self._decided.popitem(last=False)
        if keep:
            self.traces_kept += 1
        else:
            self.traces_discarded += 1
        self._count(out, spans, keep)

    def _count(self, out: list[Record], spans: list[Record], keep: bool) -> None:
        if keep:
            out.extend(spans)
        else:
            self.spans_discarded += spans_in(spans)
