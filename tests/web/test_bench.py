"""The model-face benchmarks run end to end: every path answers with the emulator's own
answer and no call fails (tiny sample sizes; the figures themselves are not judged)."""

from __future__ import annotations

from scripts.bench.model_faces import report as faces_report
from scripts.bench.model_faces import run as run_faces
from scripts.bench.model_faces import run_loops
from scripts.bench.openai_endpoint import report, run


async def test_openai_endpoint_benchmark_gets_the_emulators_answer_on_every_path():
    results = await run(n=10, rounds=2, warmup=1)
    paths = ("direct", "stateless", "new_thread", "direct_streamed", "streamed")
    assert [results[path]["n"] for path in paths] == [10] * len(paths)
    assert [results[path]["errors"] for path in paths] == [0] * len(paths)
    assert results["answer"].startswith("emulated reply")
    stateless = results["stateless"]
    assert stateless["added_p50_ms"] == stateless["p50_ms"] - results["direct"]["p50_ms"]
    assert "| through exai, no thread (`completion`)" in report(results)


async def test_model_faces_benchmark_reaches_every_face_without_errors():
    results = await run_faces(n=8, rounds=2, warmup=1, with_litellm=False)
    faces = ["direct", "exai_chat", "exai_messages", "exai_responses"]
    for name in faces + [f"{face}_streamed" for face in faces]:
        assert results[name]["n"] == 8 and results[name]["errors"] == 0, name
    assert "exai `/v1/messages`, streamed" in faces_report(results)


async def test_agent_loops_benchmark_finishes_every_loop():
    loops = await run_loops(loops=4, steps=2, latency_ms=100)
    # Three provider requests of 100 ms each, at least, for one loop and for all four.
    assert loops["one_loop_s"] >= 0.3 and loops["concurrent_wall_s"] >= 0.3
    assert loops["ratio"] == loops["concurrent_wall_s"] / loops["one_loop_s"]
