"""Prompt caching: how often the prompt prefix stays the same, and what it saves.

(a) **Prefix stability.** A 200-turn thread on SQLite, assembled by
``assemble_messages`` before every turn with a small window (8,192 tokens, 1,024
kept for the reply), so old turns start leaving after about 25 turns. Each
turn is a ~120-character question and a ~480-character answer; every 10th turn
references a file, which is edited every 25 turns. A turn *keeps the prefix*
when the previous call's stable prefix (see :mod:`exai.store.prefix`) opens its
messages byte for byte. Dropping one turn at a time (``low_water = 1``, the rule
before block dropping) is the baseline, measured in the same run as block
dropping at the default low-water mark (0.5) and at 0.75. Also reported: how
many turns each call sent on average, the context the model loses for it.

(b) **Cached share.** A 50-turn conversation against the provider emulator,
through the real ``openai`` SDK: each call's messages come from
``assemble_messages`` (the chat tool's system prompt, a file referenced every
10th turn, the answers stored as the conversation goes), and the emulator's
prompt cache reports what Moonshot would bill as cached. The share is cached
prompt tokens over all prompt tokens, in the emulator's tokens (words). Once
with kimi-k2's window (262,144 tokens), where nothing is dropped, and once with
a 6,000-token window that forces turns out after about 12 turns, with block
dropping and with the one-at-a-time baseline.

Run: ``python -m scripts.bench.prompt_cache`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from itertools import pairwise
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from exai.emulators.provider import EmulatorServer
from exai.files import read_files
from exai.store.history import AssembledMessages, ContextLimits, assemble_messages
from exai.store.prefix import shares_prefix
from exai.store.sqlite import SqliteStore
from exai.tools.chat import SYSTEM_PROMPT
from scripts.bench.common import prose

__all__ = ["main"]

OWNER = "bench"
SMALL = ContextLimits(context_window=8_192, max_output_tokens=1_024, family="kimi")
FORCING = ContextLimits(context_window=6_000, max_output_tokens=1_000, family="kimi")
KIMI_K2 = ContextLimits(context_window=262_144, max_output_tokens=16_384, family="kimi")


class _Conversation:
    """One thread on a fresh SQLite store, with a file it references now and then."""

    def __init__(self, root: Path, limits: ContextLimits, low_water: float) -> None:
        self.root, self.limits, self.low_water = root, limits, low_water
        self.source = root / "module.py"
        self.rng = random.Random(15)
        self.store: SqliteStore | None = None
        self.thread_id = ""

    async def __aenter__(self) -> _Conversation:
        self.store = await SqliteStore.open(self.root / "conversations.sqlite3")
        self.thread_id = (await self.store.create_thread(OWNER)).id
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.store is not None
        await self.store.aclose()

    async def ask(self, n: int) -> tuple[str, list[str], AssembledMessages]:
        if n % 25 == 1:
            self.source.write_text(f"def version():\n    return {n}\n")
        files = [str(self.source)] if n % 10 == 0 else []
        prompt = f"question {n}: " + prose(self.rng, 110)
        assembled = await assemble_messages(
            system_prompt=SYSTEM_PROMPT, new_input=prompt, limits=self.limits,
            store=self.store, thread_id=self.thread_id, owner=OWNER, files=files,
            roots=[str(self.root)], read_files=read_files, low_water=self.low_water,
        )  # fmt: skip
        return prompt, files, assembled

    async def answer(self, n: int, prompt: str, files: list[str], text: str) -> None:
        assert self.store is not None
        await self.store.append(self.thread_id, OWNER, [
            {"role": "user", "content": prompt}, {"role": "assistant", "content": text},
        ], request_id=f"r{n}", files=files)  # fmt: skip


async def _stability(root: Path, low_water: float, turns: int = 200) -> dict[str, Any]:
    calls: list[AssembledMessages] = []
    async with _Conversation(root, SMALL, low_water) as talk:
        for n in range(1, turns + 1):
            prompt, files, assembled = await talk.ask(n)
            calls.append(assembled)
            await talk.answer(n, prompt, files, f"answer {n}: " + prose(talk.rng, 470))
    kept = [shares_prefix(a.messages, a.stable_messages, b.messages)
            for a, b in pairwise(calls)]  # fmt: skip
    full = next(i for i, c in enumerate(calls) if c.turns_dropped)
    after = kept[full - 1 :]
    return {
        "low_water": low_water,
        "turns": turns,
        "kept": sum(kept),
        "transitions": len(kept),
        "kept_share": sum(kept) / len(kept),
        "first_drop_turn": full + 1,
        "kept_after_full": sum(after),
        "transitions_after_full": len(after),
        "mean_turns_sent_after_full": sum(c.turns_included for c in calls[full:])
        / len(calls[full:]),
    }


async def _cached_share(
    root: Path, emulator: EmulatorServer, limits: ContextLimits, low_water: float, turns: int = 50
) -> dict[str, Any]:
    emulator.reset()
    prompt_total = cached_total = 0
    dropped = 0
    client = AsyncOpenAI(base_url=emulator.base_url_kimi, api_key="sk-bench", max_retries=0)
    try:
        async with _Conversation(root, limits, low_water) as talk:
            for n in range(1, turns + 1):
                prompt, files, assembled = await talk.ask(n)
                text = f"answer {n}: " + prose(talk.rng, 470)
                emulator.script({"text": text})
                reply = await client.chat.completions.create(
                    model="kimi-k2.6",
                    messages=assembled.messages,
                )
                usage = reply.usage
                assert usage is not None and usage.prompt_tokens_details is not None
                prompt_total += usage.prompt_tokens
                cached_total += usage.prompt_tokens_details.cached_tokens or 0
                dropped = assembled.turns_dropped
                await talk.answer(n, prompt, files, reply.choices[0].message.content or "")
    finally:
        await client.close()
    return {
        "window": limits.context_window,
        "low_water": low_water,
        "turns": turns,
        "prompt_tokens": prompt_total,
        "cached_tokens": cached_total,
        "cached_share": cached_total / prompt_total,
        "turns_dropped_at_end": dropped,
    }


async def _run() -> dict[str, Any]:
    results: dict[str, Any] = {"stability": [], "cached": []}
    with tempfile.TemporaryDirectory(prefix="exai-bench-cache-") as tmp:
        for index, low_water in enumerate((1.0, 0.75, 0.5)):
            root = Path(tmp) / f"a{index}"
            root.mkdir()
            results["stability"].append(await _stability(root, low_water))
        with EmulatorServer() as emulator:
            runs = ((KIMI_K2, 0.5), (FORCING, 1.0), (FORCING, 0.5))
            for index, (limits, low_water) in enumerate(runs):
                root = Path(tmp) / f"b{index}"
                root.mkdir()
                results["cached"].append(await _cached_share(root, emulator, limits, low_water))
    return results


def main() -> dict[str, Any]:
    """Run the benchmark, print markdown tables and return the figures."""
    results = asyncio.run(_run())
    print("## Prompt caching\n")
    print("### (a) Prefix kept from one turn to the next, 200-turn thread, 8,192-token window\n")
    print("| dropping | low-water mark | prefix kept (all turns) | after the window filled "
          "| turns sent on average, after |")  # fmt: skip
    print("|---|---|---|---|---|")
    for row in results["stability"]:
        name = "one turn at a time (baseline)" if row["low_water"] == 1.0 else "in blocks"
        print(f"| {name} | {row['low_water']:g} | {row['kept']}/{row['transitions']} "
              f"({row['kept_share']:.1%}) | {row['kept_after_full']}/"
              f"{row['transitions_after_full']} | "
              f"{row['mean_turns_sent_after_full']:.1f} |")  # fmt: skip
    print("\n### (b) Share of prompt tokens billed at the cached price, 50 turns, emulator\n")
    print("| window | dropping | turns dropped at the end | prompt tokens | cached | share |")
    print("|---|---|---|---|---|---|")
    for row in results["cached"]:
        name = "one at a time" if row["low_water"] == 1.0 else f"blocks ({row['low_water']:g})"
        print(f"| {row['window']:,} | {name} | {row['turns_dropped_at_end']} | "
              f"{row['prompt_tokens']:,} | {row['cached_tokens']:,} | "
              f"{row['cached_share']:.1%} |")  # fmt: skip
    return results


if __name__ == "__main__":
    main()
