"""The digest chain's cache: a request that repeats a kept one is hashed only where
it adds to it, with the digests hashing it whole gives, and the cache stays within
its bound."""

from __future__ import annotations

from typing import Any

from exai.store.session_keys import BoundaryCache, boundaries


def _session(turns: int, tag: str) -> list[list[dict[str, Any]]]:
    """An agent's requests: each the one before, its answer (a tool call echoed with
    re-serialized arguments) and the tool's result."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                     {"role": "user", "content": f"task {tag}"}]  # fmt: skip
    requests = []
    for n in range(turns):
        requests.append(list(history))
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": "read", "arguments": f'{{ "n": {n} }}'}}  # fmt: skip
        history += [{"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"c{n}", "content": f"out {n}"}]  # fmt: skip
    return requests


def test_a_cached_request_has_the_digests_of_hashing_it_whole() -> None:
    cache = BoundaryCache()
    alice, bob = _session(6, "a"), _session(6, "b")
    for a, b in zip(alice, bob, strict=True):
        assert cache.boundaries("alice", a) == boundaries("alice", a)
        assert cache.boundaries("bob", b) == boundaries("bob", b)
    # every request after each session's first started from the one before it
    assert (cache.hits, cache.misses) == (10, 2)
    # a retry, and a request that changes an earlier message, are exact too
    assert cache.boundaries("alice", alice[3]) == boundaries("alice", alice[3])
    edited = [dict(m) for m in alice[5]]
    edited[1]["content"] = "task a, rewritten"
    assert cache.boundaries("alice", edited) == boundaries("alice", edited)
    # the same messages under another principal are another chain
    assert cache.boundaries("carol", alice[5]) == boundaries("carol", alice[5])
    assert boundaries("carol", alice[5])[-1] != boundaries("alice", alice[5])[-1]


def test_the_cache_keeps_within_its_bound_least_recent_principal_first() -> None:
    big = [{"role": "user", "content": "x" * 10_000}]
    cache = BoundaryCache(max_chars=50_000, per_owner=2)
    for owner in ("a", "b", "c"):
        cache.boundaries(owner, big)
        cache.boundaries(owner, [*big, {"role": "assistant", "content": "ok"}])
    assert cache.hits == 3  # each principal's second request started from its first
    cache.boundaries("a", big)  # "a" was let go to keep "c" within the bound
    assert cache.hits == 3
    cache.boundaries("c", big)
    assert cache.hits == 4
