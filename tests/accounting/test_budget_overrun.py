"""Budgets hold under concurrency: many calls at once near the end of a budget.

The attack run's case: a principal at 91% of a 0.01 USD daily budget fires 40
calls at once. When admission held only each call's prompt, all of them fit and
their replies took spend to many times the budget. A call now holds its prompt
and a reply as long as its output cap, so the holds of the calls admitted never
exceed what is left.

A real daemon, the real ``openai`` SDK inside it, the provider emulator (a test
fixture) answering after a delay so all 40 calls are in flight together, a
models file adding ``kimi-budget`` (Kimi K2.6 with a 4,096-token output cap and
a steep price, asked with thinking off, so its reply is all the output it bills),
and the spend read back from the store.
"""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exai.accounting.budgets import period_window
from exai.protocol import ErrorCode
from exai.store.costs import CostRow
from exai.store.sqlite import SqliteStore
from tests.conftest import emulated_providers, make_settings, running_daemon


@pytest.fixture
def emulator(provider_emulator: Any) -> Any:
    """The session's provider emulator, reset (a test fixture)."""
    provider_emulator.reset()
    return provider_emulator


MODEL = "kimi-budget"  # K2.6 under its own name, 4,096 output tokens at most
BUDGET = Decimal("0.01")
ALREADY = Decimal("0.0091")  # 91% spent
TOKEN = "tok-alice-budget-0123456789"


def settings_for(tmp_path: Path, emulator: Any) -> Any:
    models = tmp_path / "models.toml"
    # A prompt costs almost nothing, a reply 200 USD per million tokens: 0.0002 a token.
    models.write_text(f'[models."{MODEL}"]\nprovider = "kimi"\nmodel_id = "kimi-k2.6"\n'
                      'context_window = 8192\nmax_output_tokens = 4096\n'
                      'thinking = "switchable"\nfixed_temperature = true\nfixed_top_p = 0.95\n'
                      f'[models."{MODEL}".price]\ncurrency = "USD"\ninput = "0.01"\n'
                      'output = "200"\n')  # fmt: skip
    return make_settings(tmp_path, models_file=models, budgets=f"alice={BUDGET} USD/day",
                         ws_tokens=f"alice={TOKEN}", **emulated_providers(emulator))  # fmt: skip


async def spend_today(settings: Any) -> Decimal:
    store = await SqliteStore.open(settings.sqlite_path)
    try:
        start, reset = period_window("day", time.time())
        nanos = await store.spent("alice", "USD", start, reset, excluding_instance="-")
    finally:
        await store.aclose()
    return Decimal(nanos) / 10**9


async def preload(settings: Any, already: Decimal = ALREADY) -> None:
    """Spend recorded by another daemon sharing the store (91% of the budget)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = await SqliteStore.open(settings.sqlite_path)
    try:
        await store.record_costs([CostRow(time.time() - 1, "another-daemon", "alice", "chat",
                                          "s", "r", None, MODEL, "kimi", 1, 0, 1, 0, "USD",
                                          0, 0, 0, int(already * 10**9))])  # fmt: skip
    finally:
        await store.aclose()


async def storm(
    tmp_path: Path,
    emulator: Any,
    client_factory: Any,
    arguments: dict[str, Any],
    calls: int = 40,
    already: Decimal = ALREADY,
) -> dict[str, Any]:
    """``calls`` concurrent calls of ``arguments`` with ``already`` spent (91% of the
    budget); what came of them."""
    emulator.reset()
    emulator.configure(latency_ms=300)
    settings = settings_for(tmp_path, emulator)
    await preload(settings, already)
    async with running_daemon(settings) as daemon:
        clients = [await client_factory(daemon, TOKEN) for _ in range(4)]
        results = await asyncio.gather(*(
            clients[i % 4].call(arguments.get("tool", "completion"),
                                {k: v for k, v in arguments.items() if k != "tool"})
            for i in range(calls)
        ))  # fmt: skip
    admitted = [r for r in results if r.error is None]
    refused = [r for r in results if r.error and r.error.code == ErrorCode.BUDGET_EXCEEDED]
    spent = await spend_today(settings)
    return {"admitted": len(admitted), "refused": len(refused), "spent": spent,
            "ratio": spent / BUDGET, "other_errors": len(results) - len(admitted) - len(refused),
            "provider_requests": len(emulator.requests),
            "refusal": refused[0] if refused else None}  # fmt: skip


CAPPED = {"messages": [{"role": "user", "content": "write a long essay"}], "model": MODEL,
          "max_tokens": 4, "thinking_mode": "off"}  # fmt: skip
UNCAPPED = {"tool": "chat", "prompt": "write a long essay", "model": MODEL, "thinking_mode": "off"}


async def test_forty_capped_calls_at_91_percent_stay_within_the_budget(
    tmp_path, emulator, client_factory
):
    # Each call holds 4 reply tokens (0.0008 USD); 0.0009 is left: one fits.
    out = await storm(tmp_path, emulator, client_factory, CAPPED)
    assert out["other_errors"] == 0
    assert out["admitted"] == 1 and out["refused"] == 39
    assert out["provider_requests"] == out["admitted"]
    assert out["ratio"] < 2 and out["spent"] <= BUDGET  # the bound is 1x for these calls


async def test_forty_uncapped_calls_at_91_percent_are_refused_before_the_provider(
    tmp_path, emulator, client_factory
):
    # A reply of the model's 4,096-token cap would cost 0.82 USD: none fits.
    out = await storm(tmp_path, emulator, client_factory, UNCAPPED)
    assert (out["admitted"], out["refused"], out["provider_requests"]) == (0, 40, 0)
    assert out["spent"] == ALREADY
    error = out["refusal"].error
    assert "this call may cost up to" in error.message and "max_tokens" in error.message
    assert error.details["estimate"] > float(BUDGET - ALREADY)


async def test_what_a_call_did_not_use_is_free_again(tmp_path, emulator, client_factory):
    """A settled call gives back the rest of its hold: calls one after another use
    the budget up to its end, not just the first hold's worth."""
    emulator.reset()
    settings = settings_for(tmp_path, emulator)
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, TOKEN)
        # Each holds 30 reply tokens (0.006 USD) and uses 11 (0.0022). Were the holds
        # kept, one call would fit in the day; given back, a second one fits too.
        answered = 0
        for _ in range(6):
            res = await client.call("completion", {**CAPPED, "max_tokens": 30})
            answered += res.error is None
    spent = await spend_today(settings)
    assert answered == 2 and spent <= BUDGET


READ = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip


async def test_the_reasoning_exai_puts_back_on_a_tool_round_is_held_too(
    tmp_path, emulator, client_factory
):
    """The attack run's case: a caller returns a tool round without its reasoning, exai
    puts the ~20,000 tokens it kept back on it, and the hold must count them."""
    models = tmp_path / "models.toml"
    # Prompt tokens cost 100 USD per million (0.0001 each), replies nothing.
    models.write_text(f'[models."{MODEL}"]\nprovider = "kimi"\nmodel_id = "kimi-k2.6"\n'
                      'context_window = 262144\nmax_output_tokens = 4096\n'
                      'thinking = "switchable"\nfixed_temperature = true\nfixed_top_p = 0.95\n'
                      f'[models."{MODEL}".price]\ncurrency = "USD"\ninput = "100"\n'
                      'output = "0"\n')  # fmt: skip
    settings = make_settings(tmp_path, models_file=models, budgets="alice=1 USD/day",
                             ws_tokens=f"alice={TOKEN}",
                             **emulated_providers(emulator))  # fmt: skip
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}],
                     "reasoning": "ponder " * 20_000})  # fmt: skip
    ask = [{"role": "user", "content": "read a"}]
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon, TOKEN)
        first = await client.call("completion", {"messages": ask, "model": MODEL,
                                                 "tools": [READ], "max_tokens": 4})  # fmt: skip
        assert first.error is None, first.error
        (call,) = first.metadata.model_extra["tool_calls"]
        back = [*ask, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": "text of a"}]  # fmt: skip
        second = await client.call("completion", {"messages": back, "model": MODEL,
                                                  "tools": [READ], "max_tokens": 4})  # fmt: skip
    # What the caller sent is a few tokens (0.002 USD); with the reasoning exai would
    # send back, about 2 USD: over the 1 USD budget, refused before the provider.
    assert second.error is not None and second.error.code == ErrorCode.BUDGET_EXCEEDED
    assert second.error.details["estimate"] > 1.0
    assert len(emulator.requests) == 1
    assert await spend_today(settings) < Decimal("0.01")
