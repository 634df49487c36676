"""Thinking models and the caller's tool rounds: what each way of returning reasoning costs.

A scripted agent loop against the provider emulator, through the provider
registry and the real ``openai`` SDK, on kimi-k2.6 (thinking): a 2,000-character
system prompt, 12 function tools, a task, then 30 tool rounds (each with its own
reasoning and a ~600-character tool result) and a final answer; every 5th step a
side request (a title, no tools) comes in between, as real agents send them. The
client is an OpenAI client: it sends the whole history each time and never sends
``reasoning_content`` back. Four ways of serving it, each in the same run:

- **keep**: exai keeps each round's reasoning and puts it back (what exai does);
- **keep, restart at step 15**: the same, with the daemon restarted half way (a
  fresh registry: nothing kept), so the rounds before it are unknown;
- **thinking off**: no reasoning kept; every request that holds a tool round
  turns thinking off (the first request thinks);
- **placeholder**: no reasoning kept; each tool round gets a fixed stand-in
  reasoning so that Moonshot accepts it, and thinking stays on.

For each: the cache's hits and misses, whether each agent request's messages
open with the previous agent request's messages byte for byte
(:func:`exai.store.prefix.shares_prefix`), the emulator's cached share of prompt
tokens, and how many requests thought. Then the memory one kept entry costs
(tracemalloc, 10,000 entries of 1,000-character reasoning) and what restoring a
30-round history costs per request.

Run: ``python -m scripts.bench.tool_rounds`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
import tracemalloc
from itertools import pairwise
from typing import Any

from exai.emulators.prompt_cache import PromptCache
from exai.emulators.provider import EmulatorServer
from exai.emulators.replies import prompt_tokens
from exai.providers import ChatRequest, ProviderRegistry
from exai.providers.tool_reasoning import ENTRY_OVERHEAD, ToolReasoning
from exai.settings import Settings
from exai.store.prefix import shares_prefix
from scripts.bench.common import prose

__all__ = ["main"]

STEPS = 30
RESTART_AT = 15
MODEL = "kimi-k2.6"
PLACEHOLDER = "(reasoning not kept)"
TOOLS = [
    {"type": "function", "function": {"name": name, "description": f"The {name} tool.",
     "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}}}}
    for name in ("read_file", "write_file", "edit_file", "list_dir", "grep", "glob", "bash",
                 "web_fetch", "todo_write", "task", "notebook_edit", "ask_user")
]  # fmt: skip


def _settings(emulator: EmulatorServer, data_dir: str) -> Settings:
    return Settings(_env_file=None, kimi_api_key="bench", kimi_base_url=emulator.base_url_kimi,
                    provider_max_retries=0, audit_enabled=False, data_dir=data_dir)  # fmt: skip


async def _loop(emulator: EmulatorServer, data_dir: str, option: str) -> dict[str, Any]:
    emulator.reset()
    rng = random.Random(7)
    registry = ProviderRegistry.from_settings(_settings(emulator, data_dir))
    info = registry.resolve(MODEL)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": prose(rng, 2000)},
        {"role": "user", "content": "Fix the failing test in tests/test_parser.py"},
    ]
    agent_seqs: list[int] = []
    hits = misses = thought = 0
    for step in range(STEPS + 1):
        if option == "restart" and step == RESTART_AT:
            stats = registry.tool_reasoning.stats if registry.tool_reasoning else None
            hits, misses = (
                hits + (stats.hits if stats else 0),
                misses + (stats.misses if stats else 0),
            )
            await registry.aclose()
            registry = ProviderRegistry.from_settings(_settings(emulator, data_dir))
        if step and step % 5 == 0:  # a side request between the steps
            side = ChatRequest(
                model=info.model_id,
                client_history=True,
                owner="bench",
                messages=[{"role": "user", "content": "A title for this chat?"}],
            )
            await registry.complete(side, info)
        if step < STEPS:
            name = TOOLS[step % len(TOOLS)]["function"]["name"]
            emulator.script(
                {
                    "tool_calls": [{"name": name, "arguments": {"arg": f"step {step}"}}],
                    "reasoning": prose(rng, 400),
                    "when": {"offers_tool": "read_file"},
                }
            )
        else:
            emulator.script({"text": "Fixed.", "when": {"offers_tool": "read_file"}})
        sent = messages
        thinking: bool | None = None
        if option == "thinking_off" and any(m.get("tool_calls") for m in messages):
            thinking = False
        if option == "placeholder":
            sent = [
                {**m, "reasoning_content": PLACEHOLDER} if m.get("tool_calls") else m
                for m in messages
            ]
        request = ChatRequest(
            model=info.model_id,
            messages=sent,
            tools=TOOLS,
            thinking=thinking,
            client_history=True,
            owner="bench",
        )
        if option in ("thinking_off", "placeholder"):
            request.owner = None  # nothing is kept or looked up
        response = await registry.complete(request, info)
        agent_seqs.append(emulator.requests[-1]["seq"])
        thought += emulator.requests[-1]["body"].get("thinking") != {"type": "disabled"}
        if step < STEPS:
            call = response.tool_calls[0]
            messages = [
                *messages,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": prose(rng, 600)},
            ]
    if option in ("keep", "restart"):
        hits, misses = _counted(registry, hits, misses)
    await registry.aclose()
    by_seq = {r["seq"]: r for r in emulator.requests}
    bodies = [by_seq[s]["body"]["messages"] for s in agent_seqs]
    kept = sum(shares_prefix(a, len(a), b) for a, b in pairwise(bodies))
    return {"option": option, "requests": len(bodies), "thought": thought, "hits": hits,
            "misses": misses, "prefix_kept": kept, "transitions": len(bodies) - 1,
            **_cached(emulator, agent_seqs)}  # fmt: skip


def _counted(registry: ProviderRegistry, hits: int, misses: int) -> tuple[int, int]:
    stats = registry.tool_reasoning.stats if registry.tool_reasoning is not None else None
    if stats is None:
        return hits, misses
    return hits + stats.hits, misses + stats.misses


def _cached(emulator: EmulatorServer, seqs: list[int]) -> dict[str, Any]:
    """Prompt and cached tokens of the agent requests, as the emulator counts them."""
    # The emulator's usage is in its responses, which the request log does not keep;
    # the same prompt cache, fed the same prompts in the same order, gives it again.
    cache = PromptCache()
    prompt = cached = 0
    for request in emulator.requests:
        body = request["body"]
        hit = cache.observe(("kimi", body["model"], "bench"), body["messages"])
        if request["seq"] in seqs:
            prompt += prompt_tokens(body["messages"])
            cached += hit
    return {"prompt_tokens": prompt, "cached_tokens": cached,
            "cached_share": cached / prompt if prompt else 0.0}  # fmt: skip


def _memory(entries: int = 10_000, reasoning_chars: int = 1000) -> dict[str, Any]:
    rng = random.Random(3)
    texts = [prose(rng, reasoning_chars)[:reasoning_chars] for _ in range(entries)]
    history = [{"role": "user", "content": "task"}]
    turns = [{"role": "assistant", "content": "", "reasoning_content": text,
              "tool_calls": [{"id": f"c{n}", "type": "function",
                              "function": {"name": "read_file", "arguments": "{}"}}]}
             for n, text in enumerate(texts)]  # fmt: skip
    cache = ToolReasoning(max_bytes=1 << 40, ttl_s=3600)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for turn in turns:
        cache.remember("bench", history, turn)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    # The reasoning strings already exist (the response holds them); the cache keeps
    # references. A daemon's reasoning lives only in the cache once the answer is sent.
    reasoning_bytes = sum(len(t.encode()) for t in texts)
    return {"entries": entries, "reasoning_chars": reasoning_chars,
            "overhead_per_entry": grown / entries,
            "per_entry_with_reasoning": (grown + reasoning_bytes) / entries,
            "accounted_overhead": ENTRY_OVERHEAD}  # fmt: skip


def _restore_cost(rounds: int = STEPS, repeats: int = 200) -> dict[str, Any]:
    rng = random.Random(5)
    messages: list[dict[str, Any]] = [{"role": "system", "content": prose(rng, 2000)},
                                      {"role": "user", "content": "task"}]  # fmt: skip
    cache = ToolReasoning(max_bytes=1 << 30, ttl_s=3600)
    for n in range(rounds):
        turn = {"role": "assistant", "content": None, "reasoning_content": prose(rng, 400),
                "tool_calls": [{"id": f"functions.read_file:{n}", "type": "function",
                                "function": {"name": "read_file", "arguments": "{}"}}]}  # fmt: skip
        cache.remember("bench", messages, turn)
        bare = {k: v for k, v in turn.items() if k != "reasoning_content"}
        messages = [*messages, bare,
                    {"role": "tool", "tool_call_id": f"functions.read_file:{n}",
                     "content": prose(rng, 600)}]  # fmt: skip
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        _, unknown = cache.restore("bench", messages)
        samples.append(time.perf_counter() - start)
        assert unknown == []
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return {"rounds": rounds, "messages": len(messages), "chars": chars,
            "p50_ms": statistics.median(samples) * 1000}  # fmt: skip


async def _run() -> dict[str, Any]:
    results: dict[str, Any] = {"loops": []}
    with tempfile.TemporaryDirectory() as data_dir, EmulatorServer() as emulator:
        for option in ("keep", "restart", "thinking_off", "placeholder"):
            results["loops"].append(await _loop(emulator, data_dir, option))
    results["memory"] = _memory()
    results["restore"] = _restore_cost()
    return results


_NAMES = {"keep": "keep (exai)", "restart": f"keep, restart at step {RESTART_AT}",
          "thinking_off": "thinking off", "placeholder": "placeholder reasoning"}  # fmt: skip


def main() -> dict[str, Any]:
    """Run the benchmark, print markdown tables and return the figures."""
    results = asyncio.run(_run())
    print("## Thinking models and tool rounds\n")
    print(f"### Agent loop: {STEPS} tool rounds on {MODEL}, a side request every 5 steps\n")
    print(
        "| option | agent requests | thought | cache hits / misses | prefix kept | cached share |"
    )
    print("|---|---|---|---|---|---|")
    for row in results["loops"]:
        print(
            f"| {_NAMES[row['option']]} | {row['requests']} | {row['thought']} | "
            f"{row['hits']} / {row['misses']} | {row['prefix_kept']}/{row['transitions']} | "
            f"{row['cached_share']:.1%} |"
        )
    memory = results["memory"]
    print(
        f"\n### Memory: {memory['entries']:,} entries of {memory['reasoning_chars']:,}-character"
        " reasoning\n"
    )
    print(
        f"- beyond the reasoning: {memory['overhead_per_entry']:.0f} bytes per entry "
        f"(accounted as {memory['accounted_overhead']})"
    )
    print(f"- with the reasoning: {memory['per_entry_with_reasoning']:.0f} bytes per entry")
    restore = results["restore"]
    print(
        f"\n### Restoring a {restore['rounds']}-round history ({restore['messages']} messages, "
        f"{restore['chars']:,} characters): {restore['p50_ms']:.3f} ms p50\n"
    )
    return results


if __name__ == "__main__":
    main()
