"""What calls cost, end to end: a real daemon, the real SDKs, the provider emulator,
a models file with prices (a test fixture: the shipped catalogue's prices are data
kept elsewhere), and the cost rows in the real store."""

from __future__ import annotations

import asyncio
import json
import time
from decimal import Decimal
from pathlib import Path

import openai
import pytest

from exai.cli.main import main as cli
from exai.protocol import ErrorCode
from exai.providers.base import Usage
from exai.providers.pricing import Price, call_cost
from exai.store.costs import CostRow
from exai.store.sqlite import SqliteStore
from tests.conftest import emulated_providers, make_settings, running_daemon

KIMI, TURBO, GLM = "kimi-k2.7-code", "kimi-k2.6", "glm-4.6"
PRICES = {
    KIMI: Price(currency="USD", input="0.60", cached_input="0.15", output="2.50"),
    TURBO: Price(currency="USD", input="1.15", cached_input="0.15", output="8.00"),
    GLM: Price(currency="CNY", input="2", cached_input="0.4", output="8"),
}


def models_file(tmp_path: Path, prices: dict[str, Price] = PRICES) -> Path:
    path = tmp_path / "models.toml"
    path.write_text("".join(
        f'[models."{name}".price]\ncurrency = "{p.currency}"\ninput = "{p.input}"\n'
        f'cached_input = "{p.cached_input}"\noutput = "{p.output}"\n\n'
        for name, p in prices.items()
    ))  # fmt: skip
    return path


@pytest.fixture
def settings(tmp_path, emulator):
    def build(prices: dict[str, Price] = PRICES, **overrides):
        return make_settings(tmp_path, models_file=models_file(tmp_path, prices),
                             **{**emulated_providers(emulator), **overrides})  # fmt: skip

    return build


def expected(model: str, usage: dict) -> dict:
    counts = {k: v for k, v in usage.items() if k != "total_tokens"}
    return call_cost(PRICES[model], Usage(**counts)).as_dict()


async def test_costs_are_in_results_and_add_up_per_thread_principal_and_tool(
    settings, emulator, client_factory, tmp_path, monkeypatch, capsys
):
    s = settings()
    async with running_daemon(s) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "one", "model": KIMI})
        cid = first.metadata.continuation_id
        second = await client.call("chat", {"prompt": "two", "model": KIMI,
                                            "continuation_id": cid})  # fmt: skip
        unpriced = await client.call("chat", {"prompt": "three", "model": "glm-4.5-air"})
        version = await client.call("version", {})
    for res in (first, second):
        assert res.error is None and res.metadata.cost == expected(KIMI, res.metadata.usage)
        assert res.metadata.cost["total"] > 0
    assert unpriced.metadata.cost is None and unpriced.metadata.usage["prompt_tokens"] > 0
    assert version.metadata.cost is None and version.metadata.usage is None

    # The daemon has stopped: its ledger wrote every row before the store closed.
    store = await SqliteStore.open(s.sqlite_path)
    try:
        lines = await store.usage_report(time.time() - 600, time.time() + 600, "thread")
    finally:
        await store.aclose()
    thread = [x for x in lines if x.key == cid]
    assert len(thread) == 1 and thread[0].calls == 2
    total = Decimal(str(first.metadata.cost["total"])) + Decimal(str(second.metadata.cost["total"]))
    assert Decimal(thread[0].cost_total) / 10**9 == total

    monkeypatch.setenv("EXAI_DATA_DIR", str(s.data_dir))
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    assert await asyncio.to_thread(cli, ["usage", "--by", "tool", "--days", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    chat = {g["currency"]: g for g in report["groups"] if g["tool"] == "chat"}
    assert chat["USD"]["calls"] == 2 and chat[None]["calls"] == 1 and chat[None]["cost"] is None
    assert Decimal(str(chat["USD"]["cost"]["total"])) == total
    assert await asyncio.to_thread(cli, ["usage", "--by", "principal"]) == 0
    assert "anonymous" in capsys.readouterr().out


async def test_consensus_reports_the_sum_of_every_model_call(settings, client_factory):
    models = [{"model": KIMI, "stance": "for"}, {"model": TURBO, "stance": "against"}]
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Ship it?", "models": models,
                                              "synthesis_model": KIMI})  # fmt: skip
    assert res.error is None, res.error
    extra = res.metadata.model_extra
    parts = [o["cost"]["total"] for o in extra["opinions"]]
    assert [o["cost"] == expected(o["answered_by"], o["usage"]) for o in extra["opinions"]] == [
        True, True]  # fmt: skip
    synthesis_usage = {k: res.metadata.usage[k] - sum(o["usage"][k] for o in extra["opinions"])
                       for k in res.metadata.usage}  # fmt: skip
    parts.append(expected(KIMI, synthesis_usage)["total"])
    assert res.metadata.cost["currency"] == "USD"
    assert res.metadata.cost["total"] == pytest.approx(sum(parts), abs=1e-9)


async def test_mixed_currencies_are_reported_apart(settings, client_factory):
    models = [{"model": KIMI, "stance": "for"}, {"model": GLM, "stance": "against"}]
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Ship it?", "models": models})
    assert res.error is None, res.error
    assert res.metadata.cost is None
    assert [c["currency"] for c in res.metadata.model_extra["costs"]] == ["CNY", "USD"]


async def test_a_spent_budget_refuses_before_any_provider_request(
    settings, emulator, client_factory
):
    # Every reply token costs 0.10 USD (100,000 USD per million output tokens); the
    # prompt, at a hundredth of a cent per million, costs next to nothing. A call
    # holds its prompt and a reply of its output cap, so a one-token reply fits the
    # budget of 0.15 USD once.
    dear = {KIMI: Price(currency="USD", input="0.01", output="100000")}
    s = settings(dear, budgets="*=0.15 USD/day")
    one_token = {"messages": [{"role": "user", "content": "x"}], "model": KIMI,
                 "max_tokens": 1, "thinking_mode": "off"}  # fmt: skip
    async with running_daemon(s) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "one", "model": KIMI})
        assert first.error is not None  # a reply of the model's whole cap could not be paid
        assert first.error.code == ErrorCode.BUDGET_EXCEEDED and emulator.requests == []
        paid = await client.call("completion", one_token)
        assert paid.error is None and paid.metadata.cost["total"] >= 0.1
        emulator.reset()
        again = await client.call("completion", one_token)
        chat = await client.call("chat", {"prompt": "two", "model": KIMI})
    assert emulator.requests == []  # nothing reached the provider
    for res in (again, chat):
        error = res.error
        assert error is not None and error.code == ErrorCode.BUDGET_EXCEEDED
        assert not error.retryable and 0 < error.retry_after_s <= 86400
        assert error.details["budget"] == 0.15 and error.details["spent"] >= 0.1
        assert error.details["resets_at"].endswith("T00:00:00+00:00")
        assert "resets at" in error.message


async def test_spend_recorded_by_another_daemon_counts_and_the_openai_face_says_402(
    settings, emulator, tmp_path
):
    s = settings(budgets="alice=1 USD/month", ws_tokens="alice=tok-alice-0123456789")
    s.data_dir.mkdir(parents=True, exist_ok=True)
    store = await SqliteStore.open(s.sqlite_path)
    await store.record_costs([CostRow(time.time() - 1, "another-daemon", "alice", "chat", "s",
                                      "r", None, KIMI, "kimi", 1, 0, 1, 0, "USD", 0, 0, 0,
                                      10**9)])  # fmt: skip
    await store.aclose()
    emulator.reset()
    async with running_daemon(s) as daemon:
        base = f"http://127.0.0.1:{daemon.web.port}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key="tok-alice-0123456789",
                                      max_retries=2) as sdk:  # fmt: skip
            with pytest.raises(openai.APIStatusError) as refused:
                await sdk.chat.completions.create(
                    model=KIMI, messages=[{"role": "user", "content": "x"}]
                )
    assert refused.value.status_code == 402
    body = refused.value.body
    assert body["type"] == "insufficient_quota" and body["code"] == "insufficient_quota"
    assert body["exai"]["code"] == "BUDGET_EXCEEDED"
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert "retry-after" not in refused.value.response.headers  # agents would wait it out
    assert emulator.requests == []  # and the SDK did not retry it into the provider


async def test_the_openai_face_reports_cost(settings, emulator):
    async with running_daemon(settings()) as daemon:
        base = f"http://127.0.0.1:{daemon.web.port}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0) as sdk:
            reply = await sdk.chat.completions.create(
                model=KIMI, messages=[{"role": "user", "content": "x"}]
            )
    usage = reply.usage
    want = call_cost(PRICES[KIMI], Usage(prompt_tokens=usage.prompt_tokens,
                                         completion_tokens=usage.completion_tokens))  # fmt: skip
    assert reply.exai["cost"] == want.as_dict()


async def test_a_budget_holds_the_callers_tool_schemas_too(settings, emulator, client_factory):
    # Prompt tokens cost 1 USD each here. An agent's request sends its function tools
    # with every turn, and vendors bill their schemas as prompt; a budget that the
    # message alone fits must refuse the same message sent with a large schema.
    dear = {KIMI: Price(currency="USD", input="1000000", output="0.01")}
    s = settings(dear, budgets="*=40 USD/day")
    message = {"messages": [{"role": "user", "content": "x"}], "model": KIMI,
               "max_tokens": 1, "thinking_mode": "off"}  # fmt: skip
    schema = {
        "type": "object",
        "properties": {
            f"field_{i}": {"type": "string", "description": "a long description of this field " * 3}
            for i in range(20)
        },
    }
    tools = [{"type": "function", "function": {"name": "edit", "parameters": schema}}]
    async with running_daemon(s) as daemon:
        client = await client_factory(daemon)
        with_tools = await client.call("completion", {**message, "tools": tools})
        assert with_tools.error is not None
        assert with_tools.error.code == ErrorCode.BUDGET_EXCEEDED and emulator.requests == []
        plain = await client.call("completion", message)
    assert plain.error is None and len(emulator.requests) == 1
