"""The OpenAI-compatible endpoint's overhead: ``/v1/chat/completions`` through the
daemon against the same request sent to the provider emulator directly.

Both sides use the ``openai`` SDK's ``AsyncOpenAI`` with the same settings; only
the base URL differs. The emulator answers at once (no latency), so the
difference is what the daemon adds: HTTP in, the guard, the dispatcher
(limits, scopes), the tool, the provider plugin's own SDK call to the emulator,
and the answer back. Four paths, measured in alternating blocks so that drift
in the machine's load affects them alike:

- direct: the emulator, as Moonshot would be called;
- stateless: the daemon's ``completion`` path (the messages sent as given);
- new thread: the daemon's ``chat`` path, storing the turn (``X-Exai-Thread: new``);
- streamed: stateless with ``stream: true``, to the last chunk, against the
  emulator streamed directly.

Every answer is checked against the emulator's own (the same reply to the same
question on every path); a failed call or another answer counts as an error of its
path.

The emulator and the daemon run in processes of their own, so the measuring
client shares its core with neither. Run: ``python -m scripts.bench.openai_endpoint``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from openai import AsyncOpenAI

from exai.emulators.provider import KIMI_PREFIX
from scripts.bench.common import daemon_process, free_port, summarize, wait_for_http

__all__ = ["main", "report", "run"]

MODEL = "kimi-k2.6"
MESSAGES = [{"role": "user", "content": "How long is a piece of string? " * 4}]


def _reply_to(answer: str) -> str:
    """The emulator's reply without its count of the messages it saw (a thread adds its
    system prompt to them)."""
    return answer.split(" (saw ")[0]


async def _answer(client: AsyncOpenAI, **extra: Any) -> str:
    completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES, **extra)
    return completion.choices[0].message.content or ""


async def _streamed(client: AsyncOpenAI, **extra: Any) -> str:
    stream = await client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, **extra
    )
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


async def run(n: int = 600, rounds: int = 10, warmup: int = 50) -> dict[str, Any]:
    emulator_port, http_port = free_port(), free_port()
    emulator = subprocess.Popen([sys.executable, "-m", "exai.emulators.provider", "--port",
                                 str(emulator_port)], stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        await wait_for_http(emulator_port)
        provider_url = f"http://127.0.0.1:{emulator_port}{KIMI_PREFIX}"
        env = {"KIMI_API_KEY": "sk-bench", "KIMI_BASE_URL": provider_url,
               "EXAI_HTTP_PORT": str(http_port)}  # fmt: skip
        async with daemon_process(**env):  # returns once the HTTP port listens too
            direct = AsyncOpenAI(base_url=provider_url, api_key="sk-bench", max_retries=0)
            daemon = AsyncOpenAI(base_url=f"http://127.0.0.1:{http_port}/v1", api_key="bench",
                                 max_retries=0)  # fmt: skip
            paths: dict[str, Callable[[], Awaitable[str]]] = {
                "direct": lambda: _answer(direct),
                "stateless": lambda: _answer(daemon),
                "new_thread": lambda: _answer(daemon, metadata={"exai_thread": "new"}),
                "direct_streamed": lambda: _streamed(direct),
                "streamed": lambda: _streamed(daemon),
            }
            samples: dict[str, list[float]] = {name: [] for name in paths}
            errors = dict.fromkeys(paths, 0)  # a failed call, or an answer not the emulator's
            try:
                expected = await paths["direct"]()
                for request in paths.values():
                    for _ in range(warmup):
                        await request()
                for _ in range(rounds):
                    for name, request in paths.items():
                        for _ in range(n // rounds):
                            start = time.perf_counter()
                            try:
                                answer = await request()
                            except Exception:
                                errors[name] += 1
                                continue
                            samples[name].append(time.perf_counter() - start)
                            errors[name] += _reply_to(answer) != _reply_to(expected)
            finally:
                await direct.close()
                await daemon.close()
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)
    results: dict[str, Any] = {name: summarize(s) for name, s in samples.items()}
    for name in results:
        results[name]["errors"] = errors[name]
    results["answer"] = expected
    for name, base in (("stateless", "direct"), ("new_thread", "direct"),
                       ("streamed", "direct_streamed")):  # fmt: skip
        results[name]["added_p50_ms"] = results[name]["p50_ms"] - results[base]["p50_ms"]
        results[name]["added_p99_ms"] = results[name]["p99_ms"] - results[base]["p99_ms"]
    return results


_LABELS = {
    "direct": "emulator directly (`AsyncOpenAI`)",
    "stateless": "through exai, no thread (`completion`)",
    "new_thread": "through exai, new thread stored (`chat`)",
    "direct_streamed": "emulator directly, streamed",
    "streamed": "through exai, no thread, streamed",
}


def report(results: dict[str, Any]) -> str:
    rows = ["| path | p50 | p99 | added at p50 | added at p99 | calls |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for name, label in _LABELS.items():
        r = results[name]
        added = (f"{r['added_p50_ms']:+.2f} ms | {r['added_p99_ms']:+.2f} ms"
                 if "added_p50_ms" in r else " | ")  # fmt: skip
        rows.append(f"| {label} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {added} "
                    f"| {r['n']} |")  # fmt: skip
    rows.append("\nSequential requests, one at a time, against a provider emulator that "
                "answers at once; streamed rows time the whole stream.")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## OpenAI-compatible endpoint overhead\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
