"""The trace ids exai makes: the time in milliseconds first, then 80 random bits."""

from __future__ import annotations

import time

from exai import tracing


def test_a_trace_exai_starts_has_an_id_that_begins_with_its_time_in_milliseconds(spans):
    before = time.time_ns() // 1_000_000
    with tracing.span("first", parent=tracing.ROOT):
        pass
    with tracing.span("second", parent=tracing.ROOT):
        pass
    after = time.time_ns() // 1_000_000
    first, second = (spans.one(name).context.trace_id for name in ("first", "second"))
    assert before <= first >> 80 <= second >> 80 <= after
    # The low 80 bits are random: two traces of the same millisecond still differ.
    assert first & (1 << 80) - 1 != second & (1 << 80) - 1
    assert first != second


def test_the_ids_order_traces_by_when_they_started(spans):
    ids = []
    for i in range(3):
        with tracing.span(f"t{i}", parent=tracing.ROOT) as sp:
            ids.append(tracing.trace_id_of(sp))
        time.sleep(0.002)
    assert ids == sorted(ids)
    assert all(len(i) == 32 for i in ids)


def test_a_callers_trace_id_is_kept_as_it_came(spans):
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with tracing.span("served", parent=tracing.extract(caller)):
        pass
    assert spans.one("served").context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
