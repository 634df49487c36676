"""Tail-based keeping (``EXAI_TRACE_KEEP=tail``): every failed or slow call's whole
trace is exported, and a share of the rest, decided when the call's span ends."""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from exai import tracing
from exai.tracing import setup
from exai.tracing.keep import TailKeeper
from tests.conftest import make_settings

LOW = 1 << 63  # the low 64 bits of a trace id: half of the id space
MS = 1_000_000


def _record(trace_id, span_id, parent_id=0, *, ms=1, error=False, remote=False):
    return ("s", trace_id, span_id, parent_id, remote, 1, "", 0, 0, ms * MS, {}, None, None,
            2 if error else 1, None, None)  # fmt: skip


def test_a_failed_or_slow_trace_is_kept_whole_and_the_rest_by_share():
    keeper = TailKeeper(slow_ms=100, share=0.5)
    failed, slow, kept, dropped = (
        (7 << 64) | (LOW + 5),
        (8 << 64) | (LOW + 6),
        9 << 64,
        (3 << 64) | LOW,
    )
    # Children end first and are held until their root ends.
    assert keeper.add([_record(failed, 2, 1, error=True), _record(slow, 12, 11),
                       _record(kept, 22, 21), _record(dropped, 32, 31)]) == []  # fmt: skip
    assert keeper.held == 4
    out = keeper.add([_record(failed, 1), _record(slow, 11, ms=150), _record(kept, 21),
                      _record(dropped, 31)])  # fmt: skip
    assert {(r[1], r[2]) for r in out} == {(failed, 2), (failed, 1), (slow, 12), (slow, 11),
                                           (kept, 22), (kept, 21)}  # fmt: skip
    assert keeper.traces_kept == 3 and keeper.traces_discarded == 1 and keeper.spans_discarded == 2
    # A span that ends after its root follows the decision made for the trace.
    assert keeper.add([_record(kept, 23, 21), _record(dropped, 33, 31)]) == [_record(kept, 23, 21)]
    assert keeper.held == 0


def test_a_callers_span_is_not_the_root_here_and_the_held_spans_are_bounded():
    keeper = TailKeeper(slow_ms=100, share=0.0, max_held=3)
    # The face's span, whose parent is the caller's, is this process's root.
    assert keeper.add([_record(5, 2, 1, error=True, remote=True)]) == [
        _record(5, 2, 1, error=True, remote=True)
    ]
    # Past max_held the oldest trace is decided by what is known: a failure keeps it.
    held = [_record(10, 2, 1, error=True), _record(11, 2, 1), _record(12, 2, 1),
            _record(13, 2, 1)]  # fmt: skip
    assert keeper.add(held) == [held[0]]
    assert keeper.held == 3
    # At a stop, what is still held is decided the same way.
    assert keeper.release() == [] and keeper.held == 0 and keeper.spans_discarded == 3


def _call_record(trace_id, face_id, parent_id=0, *, ms=1, remote=False):
    """A call record (exai.tracing.records.CALL): a face's span nested into its call's,
    each with its one leaf, all four ended well."""
    from exai.tracing.records import CALL

    return (CALL, "call_tool echo", trace_id, face_id, parent_id, remote, 1, "", 1, 0, {},
            "admission", face_id + 1, 0, MS // 2, "execute_tool echo", face_id + 2, MS // 2,
            ms * MS, {}, "audit", face_id + 3, ms * MS - 10, ms * MS)  # fmt: skip


def test_a_call_record_is_decided_as_its_four_spans_would_be():
    """The writer's call records are kept or discarded whole, with the spans held
    for their trace, and counted as four spans each."""
    keeper = TailKeeper(slow_ms=100, share=0.5)
    slow, failed, dropped = (8 << 64) | (LOW + 6), (7 << 64) | (LOW + 5), (3 << 64) | LOW
    kept = 9 << 64  # its low 64 bits within the share
    # A provider's span under the failed trace's call, ended first, is held.
    assert keeper.add([_record(failed, 40, 12, error=True)]) == []
    records = [_call_record(slow, 10, ms=150), _call_record(failed, 10),
               _call_record(kept, 10), _call_record(dropped, 10)]  # fmt: skip
    out = keeper.add(records)
    assert out == [records[0], _record(failed, 40, 12, error=True), records[1], records[2]]
    assert keeper.traces_kept == 3 and keeper.traces_discarded == 1
    assert keeper.spans_discarded == 4 and keeper.held == 0
    # A call under a span of this process is not the root here: held, as four spans.
    local = _call_record(kept + 2, 20, parent_id=99)
    assert keeper.add([local]) == [] and keeper.held == 4
    assert keeper.add([_record(kept + 2, 99)]) == [local, _record(kept + 2, 99)]
    # A caller's remote parent makes the call's face the root.
    remote = _call_record(kept + 1, 30, parent_id=5, remote=True)
    assert keeper.add([remote]) == [remote]


def _trace(name: str, *, slow: bool = False, error: bool = False) -> int:
    """A call's trace: a root with a child, as a face and its call make them."""
    tracer = tracing.state.tracer
    assert tracer is not None
    now = time.time_ns()
    start = now - (2000 * MS if slow else MS)
    root = tracer.start_span(f"call_tool {name}", kind=tracing.SERVER, start_time=start)
    child = tracer.start_span(f"execute_tool {name}", context=trace.set_span_in_context(root),
                              start_time=start)  # fmt: skip
    if error:
        child.set_status(Status(StatusCode.ERROR, "PROVIDER_ERROR"))
    child.end(end_time=now)
    root.end(end_time=now)
    return root.get_span_context().trace_id


def test_the_writer_exports_only_the_traces_it_keeps(tmp_path, collector, monkeypatch):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                             otel_traces_sampler="always_on", trace_keep="tail",
                             trace_slow_ms=1000, trace_keep_share=0.0)  # fmt: skip
    assert setup.configure(settings)
    try:
        fast = [_trace("echo") for _ in range(20)]
        failed = _trace("chat", error=True)
        slow = _trace("codereview", slow=True)
        assert setup.flush(timeout_s=30)
        stats = setup.export_stats()
        assert stats is not None
        assert collector.trace_ids() == {failed, slow}
        assert len(collector.spans) == 4 and stats.spans_exported == 4
        assert stats.spans_discarded == 2 * len(fast) and stats.spans_failed == 0
    finally:
        report = setup.shutdown()
    assert report is not None and report.spans_unexported == 0


def test_every_kept_trace_is_exported_whole_with_a_share(tmp_path, collector, monkeypatch):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                             otel_traces_sampler="always_on", trace_keep="tail",
                             trace_keep_share=0.5)  # fmt: skip
    assert setup.configure(settings)
    try:
        made = [_trace("echo") for _ in range(200)]
        assert setup.flush(timeout_s=30)
    finally:
        setup.shutdown()
    kept = collector.trace_ids()
    assert kept == {t for t in made if t & ((1 << 64) - 1) < LOW}
    assert 40 < len(kept) < 160 and len(collector.spans) == 2 * len(kept)
