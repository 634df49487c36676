"""The call tallies behind exai_calls and exai_call_latency_seconds, as Prometheus reads them."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from exai.metrics import DaemonMetrics


def _samples(metrics: DaemonMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_calls_are_counted_and_latencies_land_in_their_buckets() -> None:
    m = DaemonMetrics()
    for seconds in (0.0004, 0.001, 0.0011, 2.0, 1000.0):  # 0.001 belongs to le="0.001"
        m.call_finished("echo", "ok", seconds)
    m.call_finished("echo", "TIMEOUT", 5.0)
    m.call_finished("unknown", "TOOL_NOT_FOUND", None)  # refused: counted, no latency
    s = _samples(m)
    assert s[("exai_calls_total", (("status", "ok"), ("tool", "echo")))] == 5
    assert s[("exai_calls_total", (("status", "TIMEOUT"), ("tool", "echo")))] == 1
    assert s[("exai_calls_total", (("status", "TOOL_NOT_FOUND"), ("tool", "unknown")))] == 1
    bucket = "exai_call_latency_seconds_bucket"
    assert s[(bucket, (("le", "0.001"), ("tool", "echo")))] == 2
    assert s[(bucket, (("le", "0.0025"), ("tool", "echo")))] == 3
    assert s[(bucket, (("le", "5.0"), ("tool", "echo")))] == 5
    assert s[(bucket, (("le", "300.0"), ("tool", "echo")))] == 5
    assert s[(bucket, (("le", "+Inf"), ("tool", "echo")))] == 6
    assert s[("exai_call_latency_seconds_count", (("tool", "echo"),))] == 6
    assert abs(s[("exai_call_latency_seconds_sum", (("tool", "echo"),))] - 1007.0025) < 1e-9
    assert not any(name.startswith("exai_call_latency") and ("tool", "unknown") in labels
                   for name, labels in s)  # fmt: skip
