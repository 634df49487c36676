"""Budgets on the model faces when exai puts a tool round's kept reasoning back.

A principal near the end of a 1 USD daily budget (prompt tokens at 100 USD per
million, so a tool round's kept reasoning is what costs) runs real tool rounds on
the three model faces (``/v1/chat/completions`` with the ``openai`` SDK,
``/v1/messages`` with the ``anthropic`` SDK, ``/v1/responses`` with the ``openai``
SDK), each round's reasoning 30 to 20,000 words long, on an unpriced copy of the
model. Then it returns every round to the priced model without its reasoning,
several times over and all at once, so exai puts the reasoning it kept back on
each. The holds must count that reasoning: what the provider would bill for what
reached it (exai's own token estimate of each request the emulator received, at
the model's price) plus what was already spent stays within the budget (1x: none of
docs/cost.md's exceptions, searches or fallbacks, is in play), and refused calls
never reach the provider. One wave per daemon: the emulator's usage leaves out the
``reasoning_content`` it is sent, so once a wave has settled the daemon's spend is
lower than a vendor's bill would make it.

In-process daemons (``tests/conftest.py``'s ``running_daemon``) on loopback, the
provider emulator answering after a delay so a wave's calls overlap.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from openai import AsyncOpenAI

from exai.store.tokens import estimator_for
from tests.accounting.test_budget_overrun import preload, spend_today
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.reliability.harness import scaled

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

BUDGET_SECTION = "attack_faces_budget"

MODEL = "kimi-budget"  # K2.6 under its own name, thinking on, priced
FREE = "kimi-free"  # the same model unpriced: the first rounds cost the budget nothing
BUDGET = Decimal("1")
INPUT_PRICE = Decimal("100") / 10**6  # USD per prompt token; replies cost nothing
TOKEN = "tok-alice-faces-0123456789"
WORDS = [30, 100, 300, 1_000, 3_000, 20_000]  # each round's reasoning, "ponder " times this
SPENT = [Decimal("0.5"), Decimal("0.8"), Decimal("0.9"), Decimal("0.95")]
FACES = ["chat", "messages", "responses"]
ASK = "read the file a"
_K26 = ('provider = "kimi"\nmodel_id = "kimi-k2.6"\ncontext_window = 262144\n'
        'max_output_tokens = 4096\nthinking = "switchable"\nfixed_temperature = true\n'
        'fixed_top_p = 0.95\n')  # fmt: skip


def _budget_settings(tmp_path: Path, emulator: Any) -> Any:
    models = tmp_path / "models.toml"
    models.write_text(f'[models."{MODEL}"]\n{_K26}[models."{MODEL}".price]\ncurrency = "USD"\n'
                      f'input = "100"\noutput = "0"\n[models."{FREE}"]\n{_K26}')  # fmt: skip
    return make_settings(tmp_path, models_file=models, budgets=f"alice={BUDGET} USD/day",
                         ws_tokens=f"alice={TOKEN}", stream_min_chunk_chars=1,
                         **emulated_providers(emulator))  # fmt: skip


CHAT_TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip
MESSAGES_TOOL = {"name": "read_file", "input_schema": CHAT_TOOL["function"]["parameters"]}
RESPONSES_TOOL = {"type": "function", "name": "read_file",
                  "parameters": CHAT_TOOL["function"]["parameters"]}  # fmt: skip


class Faces:
    """One principal's three SDK clients, each face's tool round and its replay."""

    def __init__(self, port: int) -> None:
        base = f"http://127.0.0.1:{port}"
        self.openai = AsyncOpenAI(base_url=f"{base}/v1", api_key=TOKEN, max_retries=0)
        self.anthropic = anthropic.AsyncAnthropic(base_url=base, api_key=TOKEN, max_retries=0)

    async def aclose(self) -> None:
        await self.openai.close()
        await self.anthropic.close()

    async def first_round(self, face: str, tag: str) -> Any:
        """A first request ending in a tool call; what the replay needs of it."""
        ask = f"{ASK} ({tag})"
        if face == "chat":
            done = await self.openai.chat.completions.create(
                model=FREE, messages=[{"role": "user", "content": ask}], tools=[CHAT_TOOL],
                max_tokens=4)  # fmt: skip
            (call,) = done.choices[0].message.tool_calls
            assert done.choices[0].message.model_extra.get("reasoning_content")
            return [{"role": "user", "content": ask},
                    {"role": "assistant", "content": "",  # its reasoning_content left out
                     "tool_calls": [call.model_dump(exclude_none=True)]},
                    {"role": "tool", "tool_call_id": call.id, "content": "text of a"}]  # fmt: skip
        if face == "messages":
            done = await self.anthropic.messages.create(
                model=FREE, max_tokens=4, tools=[MESSAGES_TOOL],
                messages=[{"role": "user", "content": ask}])  # fmt: skip
            kinds = [b.type for b in done.content]
            assert kinds == ["thinking", "tool_use"], kinds
            use = done.content[1]
            return [{"role": "user", "content": ask},
                    {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": "text of a"}]}]  # fmt: skip
        done = await self.openai.responses.create(
            model=FREE, input=ask, tools=[RESPONSES_TOOL], store=False, max_output_tokens=16,
            reasoning={"summary": "auto"})  # fmt: skip
        kinds = [item.type for item in done.output]
        assert kinds == ["reasoning", "function_call"], kinds
        call = done.output[1]
        return [{"role": "user", "content": ask}, call.model_dump(exclude_none=True),
                {"type": "function_call_output", "call_id": call.call_id,
                 "output": "text of a"}]  # fmt: skip

    async def replay(self, face: str, history: Any) -> str:
        """The round again, without its reasoning: ``admitted``, ``refused`` or why not."""
        try:
            if face == "chat":
                await self.openai.chat.completions.create(
                    model=MODEL, messages=history, tools=[CHAT_TOOL], max_tokens=4
                )
            elif face == "messages":
                await self.anthropic.messages.create(
                    model=MODEL, max_tokens=4, tools=[MESSAGES_TOOL], messages=history
                )
            else:
                await self.openai.responses.create(
                    model=MODEL, input=history, tools=[RESPONSES_TOOL], store=False,
                    max_output_tokens=16)  # fmt: skip
        except (openai.APIStatusError, anthropic.APIStatusError) as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            code = (body.get("exai") or {}).get("code") or json.dumps(body)[:200]
            return "refused" if code == "BUDGET_EXCEEDED" else f"{exc.status_code} {code}"
        return "admitted"


def _billed(body: dict[str, Any]) -> Decimal:
    """What a vendor billing every prompt token would charge for one request."""
    tokens = estimator_for("kimi").messages(body.get("messages") or [], body.get("tools") or [])
    return tokens * INPUT_PRICE


async def _storm(workdir: Path, emulator: Any, spent: Decimal, copies: int) -> dict[str, Any]:
    """Tool rounds on every face, then all of them returned at once, ``copies`` times
    each, without their reasoning, with ``spent`` of the budget gone."""
    emulator.reset()
    settings = _budget_settings(workdir, emulator)
    await preload(settings, spent)
    async with running_daemon(settings) as daemon:
        client = Faces(daemon.web.port)
        try:
            rounds = []
            for face in FACES:
                for words in WORDS:
                    emulator.script({"tool_calls": [{"name": "read_file",
                                                     "arguments": {"path": "a"}}],
                                     "reasoning": "ponder " * words})  # fmt: skip
                    rounds.append((face, await client.first_round(face, f"{face}-{words}")))
            first = len(emulator.requests)
            emulator.configure(latency_ms=300)
            tries = [(face, history) for face, history in rounds for _ in range(copies)]
            random.Random(len(tries) + int(spent * 100)).shuffle(tries)  # every face goes first
            results = await asyncio.gather(*(client.replay(f, h) for f, h in tries))
        finally:
            await client.aclose()
    replays = [r["body"] for r in emulator.requests[first:]]
    with_reasoning = sum(bool(m.get("reasoning_content")) for body in replays
                         for m in body["messages"] if m.get("tool_calls"))  # fmt: skip
    billed = spent + sum((_billed(body) for body in replays), Decimal(0))
    admitted = Counter(face for (face, _), result in zip(tries, results, strict=True)
                       if result == "admitted")  # fmt: skip
    return {"tries": len(tries), "outcomes": Counter(results), "provider_requests": len(replays),
            "admitted_by_face": admitted,
            "with_reasoning": with_reasoning, "billed": billed,
            "stored": await spend_today(settings)}  # fmt: skip


async def test_replayed_reasoning_is_held_on_every_face(tmp_path, emulator, figures):
    copies = scaled(5, minimum=2)
    plan = SPENT if scaled(4) >= 4 else SPENT[2:3]
    totals: Counter[str] = Counter()
    by_face: Counter[str] = Counter()
    worst = Decimal(0)
    per_level = {}
    for i, spent in enumerate(plan):
        workdir = tmp_path / f"s{i}"
        workdir.mkdir()
        out = await _storm(workdir, emulator, spent, copies)
        assert set(out["outcomes"]) <= {"admitted", "refused"}, out
        assert out["provider_requests"] == out["outcomes"]["admitted"]  # refused: none sent
        assert out["with_reasoning"] == out["provider_requests"]  # the kept reasoning went
        assert out["billed"] <= BUDGET and out["stored"] <= BUDGET, out
        totals.update(tries=out["tries"], provider_requests=out["provider_requests"],
                      sent_with_the_kept_reasoning=out["with_reasoning"],
                      **out["outcomes"])  # fmt: skip
        by_face.update(out["admitted_by_face"])
        worst = max(worst, out["billed"] / BUDGET)
        admitted = out["outcomes"]["admitted"]
        per_level[f"{spent / BUDGET:.0%}"] = f"{admitted} admitted, {out['billed'] / BUDGET:.3f}x"
    figures.record(BUDGET_SECTION, storms=len(plan), rounds_per_storm=len(FACES) * len(WORDS),
                   replays_per_round=copies, **dict(totals), admitted_by_face=dict(by_face),
                   worst_spend_over_budget=f"{worst:.3f}x",
                   by_spent_before=per_level)  # fmt: skip
