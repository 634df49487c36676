"""The model faces' overhead, against LiteLLM's, and agent loops under load.

**Added latency.** One raw HTTP client (``httpx``, keep-alive) posts each face's
request and reads the answer to its end, whole and streamed, in alternating blocks:

- direct: the same conversation as a chat-completions request to the provider
  emulator, as Moonshot would be called;
- exai: ``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` of a
  daemon whose Kimi is the emulator;
- LiteLLM: the same three routes of a LiteLLM proxy (``litellm[proxy]``, installed
  into a venv of its own under ``~/.cache/exai-bench``, never into exai's) whose
  model is the same emulator.

What a face adds is its p50 (p99) minus the direct call's, measured in the same
run. Target: at most a third of LiteLLM's added latency.

**Agent loops.** 64 concurrent agent loops of 5 tool steps (each step a request
whose answer is a tool call, then the request with the results that gets the
answer), each provider request taking 500 ms, against one loop alone. Target:
at most 1.3x one loop's time.

The emulator, the daemon and LiteLLM run in processes of their own. Run:
``python -m scripts.bench.model_faces``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from exai.emulators.provider import KIMI_PREFIX
from scripts.bench.common import daemon_process, free_port, summarize, wait_for_http

__all__ = ["litellm_proxy", "main", "report", "run", "run_loops"]

MODEL = "kimi-k2.6"  # the same model and the same reasoning behind exai and LiteLLM
# exai's token and LiteLLM's master key: the one client sends the same key to both.
TOKEN = "sk-bench-token"
QUESTION = "How long is a piece of string? " * 4
TOOL = {
    "name": "read_file",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
LITELLM_VENV = Path.home() / ".cache" / "exai-bench" / "litellm-venv"
LITELLM_SPEC = "litellm[proxy]"


def bodies(stream: bool) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each face's request for the same one-question conversation: (path, body)."""
    chat = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}], "stream": stream}
    return {
        "chat": ("/v1/chat/completions", chat),
        "messages": (
            "/v1/messages",
            {
                "model": MODEL,
                "max_tokens": 256,
                "stream": stream,
                "messages": [{"role": "user", "content": QUESTION}],
            },
        ),
        "responses": (
            "/v1/responses",
            {"model": MODEL, "input": QUESTION, "stream": stream, "store": False},
        ),
    }


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
    async with client.stream("POST", url, json=body) as response:
        async for _ in response.aiter_raw():
            pass
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code}")


def ensure_litellm() -> Path | None:
    """The ``litellm`` command of the benchmark's own venv, made on first use; None if
    it cannot be installed here."""
    binary = LITELLM_VENV / "bin" / "litellm"
    if not binary.exists():
        LITELLM_VENV.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=False)
        pip = [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", LITELLM_SPEC]
        if made.returncode != 0 or subprocess.run(pip, check=False).returncode != 0:
            return None
    return binary


@asynccontextmanager
async def litellm_proxy(provider_url: str) -> AsyncIterator[str | None]:
    """A LiteLLM proxy whose model ``MODEL`` is the emulator; yields its base URL, or None."""
    binary = ensure_litellm()
    if binary is None:
        yield None
        return
    port = free_port()
    config = Path(tempfile.mkdtemp(prefix="exai-litellm-")) / "config.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        # LiteLLM's own Moonshot provider, as a user would configure Kimi: it serves
        # /v1/messages and /v1/responses by translating them to chat completions, as
        # exai does (with openai/ it forwards them to a /responses the vendor lacks).
        f"      model: moonshot/{MODEL}\n"
        f"      api_base: {provider_url}\n"
        "      api_key: sk-bench\n"
        "litellm_settings:\n  drop_params: false\n  telemetry: false\n"
        "router_settings:\n  disable_cooldowns: true\n"
        f"general_settings:\n  master_key: {TOKEN}\n"
    )
    env = {
        **os.environ,
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "DISABLE_SCHEMA_UPDATE": "true",
    }
    proc = subprocess.Popen(
        [str(binary), "--config", str(config), "--port", str(port), "--num_workers", "1"],
        env=env,
        cwd=config.parent,
        stdout=subprocess.DEVNULL,
        stderr=open(config.parent / "litellm.log", "wb"),
    )
    try:
        deadline = time.monotonic() + 600  # a first start may take minutes on a busy machine
        while True:
            try:
                await wait_for_http(port, timeout=1)
                break
            except RuntimeError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (config.parent / "litellm.log").read_text()[-2000:]
                    raise RuntimeError(f"LiteLLM did not start:\n{log}") from None
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def run(
    n: int = 400, rounds: int = 8, warmup: int = 30, with_litellm: bool = True
) -> dict[str, Any]:
    emulator_port, http_port = free_port(), free_port()
    emulator = subprocess.Popen(
        [sys.executable, "-m", "exai.emulators.provider", "--port", str(emulator_port)],
        stdout=subprocess.DEVNULL,
    )
    samples: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    try:
        await wait_for_http(emulator_port)
        provider_url = f"http://127.0.0.1:{emulator_port}{KIMI_PREFIX}"
        env = {
            "KIMI_API_KEY": "sk-bench",
            "KIMI_BASE_URL": provider_url,
            "EXAI_HTTP_PORT": str(http_port),
            "EXAI_WS_TOKEN": TOKEN,
        }
        compare = litellm_proxy(provider_url) if with_litellm else _nothing()
        async with daemon_process(**env), compare as litellm:
            headers = {
                "authorization": f"Bearer {TOKEN}",
                "x-api-key": TOKEN,
                "anthropic-version": "2023-06-01",
            }
            async with httpx.AsyncClient(headers=headers, timeout=60) as client:
                paths: dict[str, Callable[[], Awaitable[None]]] = {}
                for stream in (False, True):
                    suffix = "_streamed" if stream else ""
                    faces = bodies(stream)
                    chat = faces["chat"][1]
                    paths[f"direct{suffix}"] = lambda chat=chat: _post(
                        client, provider_url + "/chat/completions", chat
                    )
                    for face, (route, body) in faces.items():
                        paths[f"exai_{face}{suffix}"] = lambda r=route, b=body: _post(
                            client, f"http://127.0.0.1:{http_port}{r}", b
                        )
                        if litellm is not None:
                            paths[f"litellm_{face}{suffix}"] = lambda r=route, b=body: _post(
                                client, litellm + r, b
                            )
                samples = {name: [] for name in paths}
                errors = {name: 0 for name in paths}
                for name, request in list(paths.items()):
                    for _ in range(warmup):
                        try:
                            await request()
                        except Exception:
                            errors[name] += 1
                    if errors[name] == warmup:  # this route does not work here: leave it out
                        del paths[name], samples[name]
                for _ in range(rounds):
                    for name, request in paths.items():
                        for _ in range(n // rounds):
                            start = time.perf_counter()
                            try:
                                await request()
                            except Exception:
                                errors[name] += 1
                                continue
                            samples[name].append(time.perf_counter() - start)
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)
    results: dict[str, Any] = {name: summarize(s) for name, s in samples.items() if s}
    for name, figures in results.items():
        figures["errors"] = errors.get(name, 0)
        base = "direct_streamed" if name.endswith("_streamed") else "direct"
        if name != base and base in results:
            figures["added_p50_ms"] = figures["p50_ms"] - results[base]["p50_ms"]
            figures["added_p99_ms"] = figures["p99_ms"] - results[base]["p99_ms"]
    return results


async def _loop(client: httpx.AsyncClient, url: str, steps: int) -> float:
    """One agent loop on the chat face: ``steps`` tool calls, then the answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read the five files"}]
    tools = [{"type": "function", "function": TOOL}]
    start = time.perf_counter()
    for step in range(steps + 1):
        body = {
            "model": MODEL,
            "messages": messages,
            "tools": tools,
            "tool_choice": "required" if step < steps else "none",
        }
        response = await client.post(url, json=body)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        if step == steps:
            assert message["content"], message
            break
        (call,) = message["tool_calls"]
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"file {step}"},
        ]
    return time.perf_counter() - start


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield None


async def run_loops(loops: int = 64, steps: int = 5, latency_ms: float = 500) -> dict[str, Any]:
    emulator_port, http_port = free_port(), free_port()
    emulator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exai.emulators.provider",
            "--port",
            str(emulator_port),
            "--latency-ms",
            str(latency_ms),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        await wait_for_http(emulator_port)
        provider_url = f"http://127.0.0.1:{emulator_port}{KIMI_PREFIX}"
        env = {
            "KIMI_API_KEY": "sk-bench",
            "KIMI_BASE_URL": provider_url,
            "EXAI_HTTP_PORT": str(http_port),
            "EXAI_WS_TOKEN": TOKEN,
            "EXAI_KIMI_MAX_INFLIGHT": str(loops),
        }
        async with daemon_process(**env):
            url = f"http://127.0.0.1:{http_port}/v1/chat/completions"
            limits = httpx.Limits(max_connections=loops, max_keepalive_connections=loops)
            async with httpx.AsyncClient(
                headers={"authorization": f"Bearer {TOKEN}"}, timeout=120, limits=limits
            ) as client:
                await _loop(client, url, 1)  # warm-up
                one = await _loop(client, url, steps)
                start = time.perf_counter()
                each = await asyncio.gather(*(_loop(client, url, steps) for _ in range(loops)))
                wall = time.perf_counter() - start
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)
    return {
        "loops": loops,
        "steps": steps,
        "provider_latency_ms": latency_ms,
        "one_loop_s": one,
        "concurrent_wall_s": wall,
        "slowest_loop_s": max(each),
        "ratio": wall / one,
    }


_LABELS = {
    "direct": "emulator directly",
    "exai_chat": "exai `/v1/chat/completions`",
    "exai_messages": "exai `/v1/messages`",
    "exai_responses": "exai `/v1/responses`",
    "litellm_chat": "LiteLLM `/v1/chat/completions`",
    "litellm_messages": "LiteLLM `/v1/messages`",
    "litellm_responses": "LiteLLM `/v1/responses`",
}


def report(results: dict[str, Any], loops: dict[str, Any] | None = None) -> str:
    rows = [
        "| path | p50 | p99 | added at p50 | added at p99 | calls | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for suffix, title in (("", ""), ("_streamed", ", streamed")):
        for name, label in _LABELS.items():
            r = results.get(name + suffix)
            if r is None:
                continue
            added = (
                f"{r['added_p50_ms']:+.2f} ms | {r['added_p99_ms']:+.2f} ms"
                if "added_p50_ms" in r
                else " | "
            )
            rows.append(
                f"| {label}{title} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms "
                f"| {added} | {r['n']} | {r['errors']} |"
            )
    lines = ["\n".join(rows), ""]
    for suffix in ("", "_streamed"):
        for face in ("chat", "messages", "responses"):
            ours, theirs = (
                results.get(f"exai_{face}{suffix}"),
                results.get(f"litellm_{face}{suffix}"),
            )
            if ours and theirs and theirs["added_p50_ms"] > 0:
                share = ours["added_p50_ms"] / theirs["added_p50_ms"]
                lines.append(
                    f"- {face}{suffix.replace('_', ', ')}: exai adds "
                    f"{share:.2f}x LiteLLM's added p50 (target at most 0.33)"
                )
    if loops is not None:
        lines.append(
            f"\n{loops['loops']} concurrent agent loops of {loops['steps']} tool steps, "
            f"{loops['provider_latency_ms']:.0f} ms per provider request: one loop alone "
            f"{loops['one_loop_s']:.2f} s, all {loops['loops']} together "
            f"{loops['concurrent_wall_s']:.2f} s (slowest loop {loops['slowest_loop_s']:.2f} s): "
            f"**{loops['ratio']:.2f}x** (target at most 1.3x)"
        )
    return "\n".join(lines)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    loops = asyncio.run(run_loops())
    print("## Model faces: added latency against LiteLLM, and agent loops\n")
    print(report(results, loops))
    return {"latency": results, "loops": loops}


if __name__ == "__main__":
    main()
