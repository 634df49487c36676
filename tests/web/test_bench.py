"""The model-face benchmarks run end to end: every path answers with the emulator's own
answer, each figure counts the requests that were answered, and a request that fails
or answers otherwise shows in its path's errors (tiny sample sizes; the timings
themselves are not judged)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from scripts.bench import agent_sessions, model_faces, openai_endpoint
from scripts.bench.model_faces import report as faces_report
from scripts.bench.model_faces import run as run_faces
from scripts.bench.model_faces import run_loops
from scripts.bench.openai_endpoint import report, run


def _spoil(real: Any, chosen: Any, calls: dict[int, str]) -> Any:
    """``real`` with the calls it makes for ``chosen(*args, **kw)`` numbered from 1:
    call N fails (``"fail"``) or answers something else (``"other"``) as ``calls`` says.
    The first is a warm-up, which must succeed."""
    seen = 0

    async def spoiled(*args: Any, **kw: Any) -> Any:
        nonlocal seen
        if not chosen(*args, **kw):
            return await real(*args, **kw)
        seen += 1
        if calls.get(seen) == "fail":
            raise ConnectionError("a call the test made fail")
        answer = await real(*args, **kw)
        return "another answer" if calls.get(seen) == "other" else answer

    return spoiled


async def test_openai_endpoint_benchmark_gets_the_emulators_answer_and_counts_what_fails(
    monkeypatch: pytest.MonkeyPatch,
):
    def new_thread(client: Any, **extra: Any) -> bool:
        return "metadata" in extra

    # The new-thread path fails its second call and gets another answer on its third.
    spoiled = _spoil(openai_endpoint._answer, new_thread, {2: "fail", 3: "other"})
    monkeypatch.setattr(openai_endpoint, "_answer", spoiled)
    results = await run(n=10, rounds=2, warmup=1)
    paths = ("direct", "stateless", "new_thread", "direct_streamed", "streamed")
    # n counts the calls that were answered; errors those that failed or answered otherwise.
    assert {path: (results[path]["n"], results[path]["errors"]) for path in paths} == {
        "direct": (10, 0), "stateless": (10, 0), "new_thread": (9, 2),
        "direct_streamed": (10, 0), "streamed": (10, 0),
    }  # fmt: skip
    assert results["answer"].startswith("emulated reply")
    assert all(0 < results[path]["p50_ms"] <= results[path]["p99_ms"] for path in paths)
    assert [path for path in paths if "added_p50_ms" in results[path]] == [
        "stateless", "new_thread", "streamed"]  # fmt: skip
    table = report(results)
    assert "| through exai, no thread (`completion`)" in table
    assert re.search(r"^\| through exai, new thread stored \(`chat`\) \|.* \| 9 \|$", table, re.M)


async def test_model_faces_benchmark_reaches_every_face_and_counts_what_fails(
    monkeypatch: pytest.MonkeyPatch,
):
    def responses_streamed(client: Any, url: str, body: dict[str, Any]) -> bool:
        return url.endswith("/v1/responses") and body["stream"] is True

    # exai's streamed /v1/responses fails its second and third requests.
    spoiled = _spoil(model_faces._post, responses_streamed, {2: "fail", 3: "fail"})
    monkeypatch.setattr(model_faces, "_post", spoiled)
    results = await run_faces(n=8, rounds=2, warmup=1, with_litellm=False)
    faces = ["direct", "exai_chat", "exai_messages", "exai_responses"]
    names = faces + [f"{face}_streamed" for face in faces]
    counts = {name: (results[name]["n"], results[name]["errors"]) for name in names}
    assert counts == {**dict.fromkeys(names, (8, 0)), "exai_responses_streamed": (6, 2)}
    assert all(0 < results[name]["p50_ms"] <= results[name]["p99_ms"] for name in names)
    table = faces_report(results)
    assert re.search(r"^\| exai `/v1/messages`, streamed \|.* \| 8 \| 0 \|$", table, re.M)
    assert re.search(r"^\| exai `/v1/responses`, streamed \|.* \| 6 \| 2 \|$", table, re.M)


async def test_agent_loops_benchmark_finishes_every_loop():
    loops = await run_loops(loops=4, steps=2, latency_ms=100)
    assert (loops["loops"], loops["steps"]) == (4, 2)
    # Each loop makes three provider requests of 100 ms at least (a scripted delay, so a
    # lower bound that no machine's speed breaks): one alone, and every concurrent one,
    # all of which end before the run that started them.
    assert loops["one_loop_s"] >= 0.3
    assert loops["concurrent_wall_s"] >= loops["slowest_loop_s"] >= 0.3


async def test_agent_sessions_benchmark_keeps_every_conversation_as_one_thread():
    small = {"conversations": 2, "steps": 3, "rounds": 1, "warmup": 0}
    results = await agent_sessions.run(**small, loops=3, loop_steps=3, loop_rounds=1, latency_ms=50,
                                       saturating=3, saturated_rounds=1)  # fmt: skip
    latency = results["latency"]
    paths = ["direct"] + [f"{s}_{face}" for face in ("chat", "messages", "responses")
                          for s in ("on", "off")]  # fmt: skip
    assert {path: latency[path]["n"] for path in paths} == dict.fromkeys(paths, 6)
    assert all(0 < latency[path]["p50_ms"] <= latency[path]["p99_ms"] for path in paths)
    # Two conversations per face in the latency phase and one loop per face in each of
    # the loops' and the saturated "on" sets, each one thread of three turns; nothing
    # kept with sessions off.
    assert results["verified"] and results["sent_on"] == 36
    assert results["expected"] == dict.fromkeys(("openai", "anthropic", "responses"), 4)
    assert set(latency["written_in_blocks"]) == {"chat", "messages", "responses"}
    assert 0 <= sum(latency["written_in_blocks"].values()) <= latency["on_requests"] == 18
    assert results["kept"]["off"]["threads"] == 0
    loops = results["loops"]
    assert len(loops["walls_s"]["on"]) == len(loops["walls_s"]["off"]) == 1
    assert loops["walls_s"]["on"][0] >= 0.15  # three requests of 50 ms, one after the other
    assert len(results["saturated"]["walls_s"]["on"]) == 1
    table = agent_sessions.report(results)
    assert re.search(r"^\| `/v1/responses` \|.* \| 6 \|$", table, re.M)
    assert "answered at once" in table and "while one of its blocks was measured" in table
    assert "off/off, rounds odd/even" in table  # the A/A column, empty in a single round
    assert "**Verified.**" in table
