"""The replay cache of a session: bounded in entries and in age, oldest out first."""

from __future__ import annotations

import time

from exai.auth import Principal
from exai.daemon.session import Session
from exai.limits import CapacityLimiter
from exai.protocol import CallToolResult, ResultMetadata, dump_frame_bytes


def _session() -> Session:
    return Session(id="s1", principal=Principal("p", method="none"),
                   limiter=CapacityLimiter("s", 4))  # fmt: skip


def _result(rid: str) -> bytes:
    return dump_frame_bytes(CallToolResult(request_id=rid, metadata=ResultMetadata(tool="echo")))


def test_a_full_cache_drops_its_oldest_entry() -> None:
    s = _session()
    for i in range(5):
        s.remember(f"r{i}", _result(f"r{i}"), now=time.monotonic(), max_entries=3)
    assert list(s.finished) == ["r2", "r3", "r4"]
    assert s.replay("r1", window_s=600) is None
    replayed = s.replay("r4", window_s=600)
    assert replayed is not None and replayed.request_id == "r4"


def test_a_result_stored_again_becomes_the_newest() -> None:
    s = _session()
    for rid in ("a", "b", "c"):
        s.remember(rid, _result(rid), now=1.0, max_entries=3)
    s.remember("a", _result("a"), now=2.0, max_entries=3)  # re-run after its result expired
    s.remember("d", _result("d"), now=3.0, max_entries=3)
    assert list(s.finished) == ["c", "a", "d"]


def test_entries_older_than_the_window_age_out() -> None:
    s = _session()
    s.remember("old", _result("old"), now=0.0, max_entries=10)
    s.remember("new", _result("new"), now=500.0, max_entries=10)
    s._expire(now=700.0, window_s=600.0, max_entries=10)
    assert list(s.finished) == ["new"]
