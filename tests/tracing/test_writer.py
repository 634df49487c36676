"""The span writer process: a collector that is up gets every span of every call,
from a real daemon; one that hangs costs a bounded, counted number of spans."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from exai.tracing import setup
from tests.conftest import make_settings, running_daemon
from tests.tracing.test_stop import silent_collector


async def test_a_collector_that_is_up_gets_every_span_of_every_call(
    tmp_path, client_factory, collector, monkeypatch
):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                             otel_traces_sampler="always_on")  # fmt: skip
    assert setup.configure(settings)
    try:
        async with running_daemon(settings) as daemon:
            clients = [await client_factory(daemon) for _ in range(4)]
            results = [await c.call("echo", {"text": f"n{i}"}) for i in range(25) for c in clients]
            assert all(r.error is None for r in results)
            assert setup.flush(timeout_s=30)
    finally:
        report = setup.shutdown()
    traces = {int(r.metadata.model_extra["trace_id"], 16) for r in results}
    assert collector.trace_ids() == traces and len(traces) == 100
    names = sorted(s.name for s in collector.spans)
    assert names.count("call_tool echo") == 100 and names.count("audit") == 100
    assert len(collector.spans) == 400
    assert report is not None and report.spans_exported == 400 and report.spans_unexported == 0


def test_a_batch_holds_at_most_the_batch_size_in_spans_leaves_included(
    tmp_path, collector, monkeypatch
):
    """Leaves travel in their parent's record and are encoded from it; a batch counts
    them as the spans they are, and splits a record whose leaves would pass it."""
    from exai import tracing

    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                             otel_traces_sampler="always_on")  # fmt: skip
    assert setup.configure(settings)
    try:
        for i in range(5):  # a face's span with two leaves: three spans in one record
            face = tracing.start(f"call {i}")
            with tracing.activate(face):
                with tracing.leaf("admission"):
                    pass
                with tracing.leaf("audit"):
                    pass
            tracing.finish(face)
        assert setup.flush(timeout_s=30)
    finally:
        report = setup.shutdown()
    assert sum(collector.sizes) == 15 and max(collector.sizes) <= 4
    assert len(collector.sizes) == 4  # 4, 4, 4 and the 3 the flush sent
    by_id = {s.span_id: s for s in collector.spans}
    leaves = [s for s in collector.spans if s.name in ("admission", "audit")]
    assert len(leaves) == 10
    assert all(by_id[s.parent_span_id].name.startswith("call ") for s in leaves)
    assert report is not None and report.spans_exported == 15


def test_call_records_cross_the_writer_as_their_four_spans_batched_and_limited(
    tmp_path, collector, monkeypatch
):
    """A call record (a face's span nested into its call's) reaches the collector as
    the four spans it stands for, parents and all, split across batches of three
    spans; a span limit that would cut its attributes is applied to them too."""
    import asyncio

    from exai import tracing
    from exai.daemon import traced

    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "3")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2")
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                             otel_traces_sampler="always_on")  # fmt: skip
    session = SimpleNamespace(id="s1", principal=SimpleNamespace(name="alice"))

    async def serve(i: int) -> None:
        loop = asyncio.get_running_loop()

        async def run(call: Any) -> None:
            span = traced.call_span(session, call, "echo")
            assert span is not None
            span.audited(time.time_ns(), None, None)

        def submit() -> Any:
            traced.admitted(time.time_ns())
            call = SimpleNamespace(request_id=f"r{i}", timeout_s=30.0, task=None)
            call.task = loop.create_task(run(call))
            return call.task

        await tracing.serve("call_tool echo", {"exai.request.id": f"r{i}"}, None, None, submit)

    assert setup.configure(settings)
    try:
        for i in range(3):
            asyncio.run(serve(i))
        assert setup.flush(timeout_s=30)
    finally:
        report = setup.shutdown()
    assert sum(collector.sizes) == 12 and max(collector.sizes) <= 3
    by_id = {s.span_id: s for s in collector.spans}
    names = sorted(s.name for s in collector.spans)
    assert names == sorted(["call_tool echo", "admission", "execute_tool echo", "audit"] * 3)
    for s in collector.spans:
        parent = {"admission": "call_tool echo", "execute_tool echo": "call_tool echo",
                  "audit": "execute_tool echo"}.get(s.name)  # fmt: skip
        if parent is not None:
            assert by_id[s.parent_span_id].name == parent
    calls = [s for s in collector.spans if s.name == "execute_tool echo"]
    assert all(len(s.attributes) == 2 and s.dropped_attributes_count == 4 for s in calls)
    assert report is not None and report.spans_exported == 12


def test_a_hanging_collector_costs_a_bounded_counted_number_of_spans(tmp_path, monkeypatch):
    from exai import tracing

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    with silent_collector() as hanging:
        settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=hanging.url,
                                 otel_traces_sampler="always_on")  # fmt: skip
        assert setup.configure(settings)
        try:
            for i in range(60):
                with tracing.span(f"step {i}"):
                    pass
            assert setup.flush(timeout_s=60)
            stats = setup.export_stats()
            assert stats is not None
            assert stats.spans_ended == 60 and stats.spans_exported == 0
            assert stats.spans_failed == 60  # every one counted: failed, or dropped unsent
            assert 0 < stats.spans_dropped <= 60 - 1 and stats.batches_failed >= 1
        finally:
            setup.shutdown(timeout_s=1)


def _writer_pids() -> list[int]:
    """This process's children running the span writer."""
    me, found = str(os.getpid()), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat[1] == me and b"exai.tracing.writer" in cmdline:
            found.append(int(entry.name))
    return found


def test_the_span_writer_gets_no_secret_in_its_environment(tmp_path, collector, monkeypatch):
    from exai import tracing

    monkeypatch.setenv("KIMI_API_KEY", "kimi-key-span-writer-789")
    monkeypatch.setenv("EXAI_WS_TOKEN", "tok-span-writer-123")
    settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                             otel_traces_sampler="always_on")  # fmt: skip
    assert setup.configure(settings)  # no environment given: the worker environment
    try:
        with tracing.span("step"):
            pass
        assert setup.flush(timeout_s=30)
        [pid] = _writer_pids()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        for secret in (b"kimi-key-span-writer-789", b"tok-span-writer-123"):
            assert secret not in environ
        assert not any(name.startswith(b"EXAI_") for name in environ.split(b"\0"))
    finally:
        setup.shutdown()


def test_the_span_writer_runs_below_the_daemons_priority(tmp_path, collector):
    """Calls first, as the audit and session writers: the writer gives up
    EXAI_TRACE_WRITER_NICE (10 unless set) of CPU priority, and exports all the same."""
    from exai import tracing

    ours = os.getpriority(os.PRIO_PROCESS, 0)
    for nice, expected in ((None, min(19, ours + 10)), (3, min(19, ours + 3)), (0, ours)):
        extra = {} if nice is None else {"trace_writer_nice": nice}
        settings = make_settings(tmp_path, otel_exporter_otlp_endpoint=collector.url,
                                 otel_traces_sampler="always_on", **extra)  # fmt: skip
        assert setup.configure(settings)
        try:
            with tracing.span("step"):
                pass
            assert setup.flush(timeout_s=30)
            [pid] = _writer_pids()
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert int(stat[16]) == expected  # its nice value, field 19 of proc(5)
        finally:
            setup.shutdown()
    assert sum(1 for s in collector.spans if s.name == "step") == 3
