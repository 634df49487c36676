"""The replay cache: bounded in age, in entries per session and in bytes across
sessions, oldest out first; an ended session's entries go with it."""

from __future__ import annotations

import hashlib
import json

from exai.daemon.replay import ENTRY_OVERHEAD_BYTES, ReplayCache, call_fingerprint


def _cache(max_entries: int = 10, max_bytes: int = 10**9, window_s: float = 600.0) -> ReplayCache:
    return ReplayCache(window_s=window_s, max_entries=max_entries, max_bytes=max_bytes)


def _kept(cache: ReplayCache, session: str, rids: list[str], now: float = 0.0) -> list[str]:
    return [rid for rid in rids if cache.get(session, rid, now) is not None]


def test_a_full_session_drops_its_oldest_entry() -> None:
    cache = _cache(max_entries=3)
    for i in range(5):
        cache.put("s1", f"r{i}", "fp", f"result {i}".encode(), now=0.0)
    assert _kept(cache, "s1", [f"r{i}" for i in range(5)]) == ["r2", "r3", "r4"]
    entry = cache.get("s1", "r4", now=0.0)
    assert entry is not None and entry.result == b"result 4" and entry.fingerprint == "fp"


def test_a_result_stored_again_becomes_the_newest() -> None:
    cache = _cache(max_entries=3)
    for rid in ("a", "b", "c"):
        cache.put("s1", rid, "fp", b"x", now=1.0)
    cache.put("s1", "a", "fp", b"x", now=2.0)  # run again after its result expired
    cache.put("s1", "d", "fp", b"x", now=3.0)
    assert _kept(cache, "s1", ["a", "b", "c", "d"], now=3.0) == ["a", "c", "d"]
    assert len(cache) == 3


def test_entries_older_than_the_window_age_out() -> None:
    cache = _cache()
    cache.put("s1", "old", "fp", b"x", now=0.0)
    cache.put("s2", "new", "fp", b"x", now=500.0)
    assert cache.get("s1", "old", now=700.0) is None  # past the window, even before a sweep
    assert cache.expire(now=700.0) == 1
    assert len(cache) == 1 and cache.get("s2", "new", now=700.0) is not None


def test_the_byte_bound_holds_across_sessions_oldest_first() -> None:
    size = 1000 + ENTRY_OVERHEAD_BYTES
    cache = _cache(max_bytes=5 * size)
    for i in range(8):
        cache.put(f"s{i % 2}", f"r{i}", "fp", b"x" * 1000, now=float(i))
    assert cache.bytes == 5 * size and len(cache) == 5
    assert _kept(cache, "s0", ["r0", "r2", "r4", "r6"], now=8.0) == ["r4", "r6"]
    assert _kept(cache, "s1", ["r1", "r3", "r5", "r7"], now=8.0) == ["r3", "r5", "r7"]


def test_a_result_larger_than_the_bound_is_not_kept() -> None:
    cache = _cache(max_bytes=4096)
    cache.put("s1", "small", "fp", b"x" * 100, now=0.0)
    cache.put("s1", "huge", "fp", b"x" * 10_000, now=1.0)
    assert len(cache) == 0 and cache.bytes == 0


def test_an_ended_session_frees_everything_it_kept() -> None:
    cache = _cache()
    for i in range(4):
        cache.put("gone", f"r{i}", "fp", b"x" * 100, now=0.0)
    cache.put("stays", "r0", "fp", b"x" * 100, now=0.0)
    cache.forget("gone")
    assert len(cache) == 1 and cache.bytes == 100 + ENTRY_OVERHEAD_BYTES
    assert cache.get("gone", "r0", now=0.0) is None and cache.get("stays", "r0", now=0.0)


def test_the_fingerprint_is_of_the_tool_and_the_arguments_whatever_their_order() -> None:
    assert call_fingerprint("chat", {"a": 1, "b": [1, {"c": 2}]}) == call_fingerprint(
        "chat", {"b": [1, {"c": 2}], "a": 1}
    )
    assert call_fingerprint("chat", {"a": 1}) != call_fingerprint("chat", {"a": 2})
    assert call_fingerprint("chat", {"a": 1}) != call_fingerprint("echo", {"a": 1})
    assert call_fingerprint("chat", {"a": 1.0}) != call_fingerprint("chat", {"a": "1.0"})
    assert len(call_fingerprint("echo", {"text": "\ud800"})) == 64  # a lone surrogate
    # It is the SHA-256 of the tool, a NUL and the arguments as canonical JSON.
    arguments = {"z": [1.5, None, True], "a": {"é": "\u2028"}, "n": 10**30}
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = hashlib.sha256(b"chat\x00" + canonical.encode()).hexdigest()
    assert call_fingerprint("chat", arguments) == expected


def test_a_kept_frame_gives_the_fingerprint_of_its_call_and_counts_in_the_bytes():
    raw = json.dumps({"op": "call_tool", "request_id": "r1", "name": "echo",
                      "arguments": {"text": "hi", "delay_s": 0}})  # fmt: skip
    cache = ReplayCache(window_s=60, max_entries=10, max_bytes=10**6)
    cache.put("s1", "r1", None, b"result", now=0.0, request=raw)
    entry = cache.get("s1", "r1", now=1.0)
    assert entry is not None
    # Key order does not matter: the fingerprint is of the call, not of the text.
    assert entry.fingerprint == call_fingerprint("echo", {"delay_s": 0, "text": "hi"})
    assert entry.fingerprint != call_fingerprint("echo", {"text": "hi"})
    assert cache.bytes == len(b"result") + len(raw) + ENTRY_OVERHEAD_BYTES
