"""The stable prefix: turn N's messages open turn N+1's byte for byte, and the
vendors' prompt caches (here the emulator's) bill that prefix as cached."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI
from zai import ZaiClient

from exai.emulators.provider import EmulatorServer
from exai.emulators.replies import prompt_tokens
from exai.files import read_files
from exai.store.base import ConversationStore
from exai.store.history import AssembledMessages, ContextLimits, assemble_messages
from exai.store.prefix import canonical_json, prefix_bytes, shares_prefix
from exai.store.sqlite import SqliteStore

SYSTEM = "You are a careful reviewer. Cite files as path:line."


def turn_messages(n: int, answer: str) -> list[dict[str, Any]]:
    """What a turn stores after its user message: every third turn searches the web."""
    if n % 3:
        return [{"role": "assistant", "content": answer}]
    call = {
        "id": f"web_search-{n}",
        "type": "builtin_function",
        "function": {"name": "$web_search", "arguments": '{"query": "q' + str(n) + '"}'},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"web_search-{n}", "name": "$web_search",
         "content": f"results for q{n} " + "r " * 40},
        {"role": "assistant", "content": answer},
    ]  # fmt: skip


async def test_turn_n_is_a_byte_prefix_of_turn_n_plus_1(
    store: ConversationStore, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    return 0\n")
    b.write_text("X = 1\n")
    limits = ContextLimits(context_window=3_000, max_output_tokens=400, family="kimi")
    thread = await store.create_thread("alice")
    calls: list[AssembledMessages] = []
    for n in range(1, 41):
        files = [str(a)] if n % 5 == 1 else [str(b)] if n % 7 == 0 else []
        a.write_text(f"def f():\n    return {n}\n")  # edited between turns: read fresh each time
        prompt = f"question {n}: " + "why " * (5 + n % 4)
        assembled = await assemble_messages(
            system_prompt=SYSTEM, new_input=prompt, limits=limits, store=store,
            thread_id=thread.id, owner="alice", files=files, roots=[str(tmp_path)],
            read_files=read_files,
        )  # fmt: skip
        assert assembled.estimated_tokens <= 3_000 - 400
        assert assembled.messages[0] == {"role": "system", "content": SYSTEM}
        assert assembled.messages[-1] == {"role": "user", "content": prompt}
        # Files come after the stable prefix, read now.
        own = assembled.messages[assembled.stable_messages : -1]
        assert len(own) == 1 and f"return {n}" in own[0]["content"]
        calls.append(assembled)
        await store.append(thread.id, "alice", [{"role": "user", "content": prompt},
                                                *turn_messages(n, f"answer {n} " + "yes " * 30)],
                           request_id=f"r{n}", files=files)  # fmt: skip

    drops = [n for n in range(1, 40) if calls[n].turns_dropped != calls[n - 1].turns_dropped]
    assert drops, "the window never forced a turn out; the test proves nothing about drops"
    for n in range(1, 40):
        earlier, later = calls[n - 1], calls[n]
        if n in drops:
            # A drop moves the history, but the system prompt still opens the call.
            assert shares_prefix(earlier.messages, 1, later.messages)
            assert later.turns_dropped > earlier.turns_dropped
            continue
        assert shares_prefix(earlier.messages, earlier.stable_messages, later.messages), n
        # ...and the prefix grows by the previous turn, as stored.
        assert later.stable_messages > earlier.stable_messages
    # Turns leave in blocks: far fewer drops than calls that had to drop something.
    dropping = sum(1 for c in calls if c.turns_dropped)
    assert dropping >= 3 * len(drops)
    note = calls[-1].messages[1]
    assert note["role"] == "system" and f"the {calls[-1].turns_dropped} earliest" in note["content"]


def test_a_changed_byte_ends_the_prefix() -> None:
    earlier = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert shares_prefix(earlier, 2, [*earlier, {"role": "assistant", "content": "yo"}])
    assert shares_prefix(earlier, 2, earlier)
    reordered = [earlier[0], {"content": "hi", "role": "user"}]
    assert not shares_prefix(earlier, 2, [*reordered, {"role": "assistant", "content": "yo"}])
    longer = [earlier[0], {"role": "user", "content": "hi there"}]
    assert not shares_prefix(earlier, 2, longer)
    assert prefix_bytes(earlier, 1) == canonical_json(earlier[:1])[:-1]


async def test_a_stable_prefix_is_billed_as_cached_by_the_emulator(
    provider_emulator: EmulatorServer, tmp_path: Path
) -> None:
    """Through the real ``openai`` SDK (Moonshot's usage fields) and ``zai-sdk`` (Z.ai's).
    Each prompt is over 256 tokens: Moonshot caches no shorter prompt."""
    emulator = provider_emulator
    emulator.reset()
    limits = ContextLimits(context_window=100_000, max_output_tokens=1_000, family="kimi")
    store = await SqliteStore.open(tmp_path / "c.sqlite3")
    client = AsyncOpenAI(base_url=emulator.base_url_kimi, api_key="sk-test", max_retries=0)
    try:
        thread = await store.create_thread("alice")
        previous: AssembledMessages | None = None
        for n in range(1, 6):
            assembled = await assemble_messages(
                system_prompt=SYSTEM, new_input=f"question {n} " + "how " * 300, limits=limits,
                store=store, thread_id=thread.id, owner="alice",
            )  # fmt: skip
            reply = await client.chat.completions.create(
                model="kimi-k2.6", messages=assembled.messages
            )
            usage = reply.usage
            assert usage is not None
            cached = usage.prompt_tokens_details.cached_tokens
            assert (usage.model_extra or {}).get("cached_tokens") == cached
            if previous is None:
                assert cached == 0
            else:
                # Everything the previous call sent opens this one: all of it is cached.
                assert cached == prompt_tokens(previous.messages) > 0
                assert cached < usage.prompt_tokens
            await store.append(thread.id, "alice", [
                assembled.messages[-1],
                {"role": "assistant", "content": reply.choices[0].message.content},
            ], request_id=f"r{n}")  # fmt: skip
            previous = assembled

        # A system prompt opening with a timestamp leaves nothing cached.
        stamped = [{"role": "system", "content": f"[{time.time_ns()}] {SYSTEM}"},
                   *previous.messages[1:]]  # fmt: skip
        reply = await client.chat.completions.create(model="kimi-k2.6", messages=stamped)
        assert reply.usage is not None
        assert reply.usage.prompt_tokens_details.cached_tokens == 0
    finally:
        await client.close()
        await store.aclose()

    glm = ZaiClient(api_key="test-glm-key", base_url=emulator.base_url_glm)
    first = glm.chat.completions.create(model="glm-4.6", messages=previous.messages)
    again = glm.chat.completions.create(model="glm-4.6", messages=[
        *previous.messages, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and then?"}])  # fmt: skip
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert again.usage.prompt_tokens_details.cached_tokens == prompt_tokens(previous.messages)
