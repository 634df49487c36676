"""Limits as data: the rule that combines a key's values, the principal's run-time
overrides and the environment's defaults; a rate raised at run time lets a burst of
one principal's calls through that the default refused; a budget threshold notified
once per period to a loopback webhook, with its audit event."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest

from exai.accounting.alerts import crossed, period_key
from exai.accounting.limits import Overrides, burst_for, effective, parse_rate
from exai.auth import Principal
from exai.client import ExaiClient
from exai.jobs.notify import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from exai.settings.values import Budget
from exai.store.limits import LimitRow
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.jobs.conftest import Receiver, receiver  # noqa: F401 (the fixture)

DAY5 = Budget(Decimal(5), "USD", "day")
DAY2 = Budget(Decimal(2), "USD", "day")
MONTH = Budget(Decimal(50), "USD", "month")


@pytest.mark.parametrize(("text", "per_min"), [
    ("600/min", 600.0), ("10/s", 600.0), ("36000/hour", 600.0), ("600", 600.0),
    (" 7.5 / minute ", 7.5),
])  # fmt: skip
def test_rates_are_read_per_minute(text: str, per_min: float) -> None:
    assert parse_rate(text) == per_min


@pytest.mark.parametrize("text", ["", "fast", "0/min", "-5/min", "10/week"])
def test_a_rate_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        parse_rate(text)


def test_the_stricter_of_key_and_principal_wins_and_the_default_only_when_neither_sets() -> None:
    key = Principal("bob", budget=DAY5, rate_per_min=100.0,
                    models=frozenset({"kimi-k2.6", "glm-5.1"}))  # fmt: skip
    mine = Overrides("bob", budget=DAY2, rate_per_min=600.0, models=frozenset({"glm-5.1"}))
    both = effective(key, mine, default_budget=MONTH, default_rate=1200.0)
    assert both.budgets == (DAY2,) and both.rate_per_min == 100.0
    assert both.models == frozenset({"glm-5.1"})
    # Budgets of different periods are both kept; the environment's is then not used.
    month_key = Principal("bob", budget=MONTH)
    assert effective(month_key, mine, default_budget=DAY5, default_rate=0).budgets == (MONTH, DAY2)
    # Only the principal's override: it replaces the defaults, even to raise them.
    raised = effective(Principal("bob"), Overrides("bob", budget=Budget(Decimal(99), "USD", "day"),
                                                   rate_per_min=6000.0),
                       default_budget=DAY5, default_rate=1200.0)  # fmt: skip
    assert raised.budgets[0].amount == 99 and raised.rate_per_min == 6000.0
    assert raised.models is None
    plain = effective(Principal("bob"), None, default_budget=DAY5, default_rate=1200.0)
    assert plain.budgets == (DAY5,) and plain.rate_per_min == 1200.0 and plain.models is None


def test_a_raised_rate_raises_the_burst_with_it() -> None:
    assert burst_for(1200.0, 1200.0, 200) == 200
    assert burst_for(6000.0, 1200.0, 200) == 1000
    assert burst_for(60.0, 1200.0, 200) == 10
    assert burst_for(600.0, 0.0, 200) == 200  # no default rate: at least the default burst


def test_a_threshold_is_crossed_at_its_share_and_named_per_period() -> None:
    assert not crossed(0, DAY5, 0.8)
    assert not crossed(3_999_999_999, DAY5, 0.8)
    assert crossed(4_000_000_000, DAY5, 0.8)
    assert not crossed(10**12, DAY5, 0.0)  # off
    assert period_key(DAY5, 86400.0, 0.8) == "USD/day/1970-01-02@0.8"


# --- on a running daemon ------------------------------------------------------------------

TOKEN = "tok-bob-0123456789"


async def _burst(url: str, calls: int, connections: int = 8) -> list[str | None]:
    """``calls`` echo calls at once over ``connections`` connections of one principal;
    each one's error code (None: answered)."""
    clients = [ExaiClient(url, TOKEN) for _ in range(connections)]
    await asyncio.gather(*(c.connect() for c in clients))
    try:
        results = await asyncio.gather(*(
            clients[n % connections].call("echo", {"text": f"loop {n}"})
            for n in range(calls)))  # fmt: skip
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    return [None if r.error is None else r.error.code for r in results]


async def test_a_rate_raised_at_run_time_lets_a_burst_through_the_default_refused(tmp_path):
    settings = make_settings(tmp_path, ws_tokens=f"bob={TOKEN}", rate_limit_per_min=60,
                             rate_limit_burst=4, limits_poll_s=0.05)  # fmt: skip
    async with running_daemon(settings) as daemon:
        first = await _burst(daemon.url, 64)
        assert first.count(None) < 16 and set(first) == {None, "RATE_LIMITED"}
        store = daemon.core.services.store
        await store.put_principal_limits(LimitRow("bob", rate_per_min=6000.0))
        limits = daemon.core.services.ledger.limits
        for _ in range(400):  # the daemon's own poll; bounded so a miss fails, not hangs
            if limits.overrides("bob") is not None:
                break
            await asyncio.sleep(0.025)
        assert await _burst(daemon.url, 64) == [None] * 64
        await store.clear_principal_limits("bob")
        for _ in range(400):
            if limits.overrides("bob") is None:
                break
            await asyncio.sleep(0.025)
        assert "RATE_LIMITED" in await _burst(daemon.url, 64)


HOOK_KEY = "hook-secret-0123456789abcdef"


async def test_a_budget_threshold_is_notified_once_per_period_with_an_audit_event(
    tmp_path,
    provider_emulator,
    receiver: Receiver,  # noqa: F811
):
    provider_emulator.reset()
    audit = tmp_path / "audit.jsonl"
    settings = make_settings(
        tmp_path, ws_tokens=f"bob={TOKEN}", budgets="bob=1 USD/day", budget_alert_at=0.00001,
        budget_alert_url=receiver.url("/budget"), jobs_webhook_secret=HOOK_KEY,
        jobs_notify_hosts=["127.0.0.1"], audit_enabled=True, audit_sink="jsonl",
        audit_jsonl_path=audit, audit_ship_interval_s=0.1,
        **emulated_providers(provider_emulator),
    )  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = ExaiClient(daemon.url, TOKEN)
        await client.connect()
        try:
            for n in range(3):
                result = await client.call("chat", {"prompt": f"hello {n}", "model": "kimi-k2.6"})
                assert result.error is None, result.error
        finally:
            await client.close()
        for _ in range(400):
            if receiver.received:
                break
            await asyncio.sleep(0.025)
        await daemon.core.services.ledger.alerts.aclose()
    [hook] = receiver.received  # three calls over the line: one notification
    assert hook.path == "/budget"
    stamp = int(hook.headers[TIMESTAMP_HEADER.lower()])
    assert verify(HOOK_KEY, stamp, hook.body, hook.headers[SIGNATURE_HEADER.lower()])
    payload = json.loads(hook.body)
    assert payload["event"] == "budget_threshold" and payload["principal"] == "bob"
    assert (payload["budget"], payload["currency"], payload["period"]) == (1.0, "USD", "day")
    assert payload["spent"] > 0
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    [alert] = [e for e in events if e["kind"] == "budget_threshold"]
    assert alert["principal"] == "bob" and alert["notified"] is True


async def test_a_threshold_off_or_without_a_url_sends_nothing(tmp_path, provider_emulator):
    provider_emulator.reset()
    settings = make_settings(tmp_path, ws_tokens=f"bob={TOKEN}", budgets="bob=1 USD/day",
                             **emulated_providers(provider_emulator))  # fmt: skip
    async with running_daemon(settings) as daemon:
        assert daemon.core.services.ledger.alerts is None


ALICE = "tok-alice-0123456789"


async def test_the_admin_api_raises_a_budget_for_operators_only(tmp_path, provider_emulator):
    import httpx

    provider_emulator.reset()
    settings = make_settings(
        tmp_path, ws_tokens=f"alice={ALICE},bob={TOKEN}", admin_principals=["alice"],
        budgets="bob=0.000001 USD/day", **emulated_providers(provider_emulator),
    )  # fmt: skip

    async def chat(daemon) -> str | None:
        client = ExaiClient(daemon.url, TOKEN)
        await client.connect()
        try:
            result = await client.call("chat", {"prompt": "hi", "model": "kimi-k2.6"})
        finally:
            await client.close()
        return None if result.error is None else result.error.code

    async with running_daemon(settings) as daemon:
        assert daemon.web is not None
        url = f"http://127.0.0.1:{daemon.web.port}/admin/limits"
        as_alice = {"authorization": f"Bearer {ALICE}"}
        async with httpx.AsyncClient() as http:
            assert await chat(daemon) == "BUDGET_EXCEEDED"
            refused = await http.patch(f"{url}/bob", json={"budget": "5 USD/day"},
                                       headers={"authorization": f"Bearer {TOKEN}"})  # fmt: skip
            assert refused.status_code == 403
            assert (
                await http.get(url, headers={"authorization": f"Bearer {TOKEN}"})
            ).status_code == 403
            bad = await http.patch(f"{url}/bob", json={"rate": "fast"}, headers=as_alice)
            assert bad.status_code == 400 and "rate" in bad.json()["error"]["message"]
            bad = await http.patch(f"{url}/bob", json={"models": ["nope"]}, headers=as_alice)
            assert bad.status_code == 400
            changes = {"budget": "5 USD/day", "rate": 600, "models": "k2"}
            raised = await http.patch(f"{url}/bob", json=changes, headers=as_alice)
            assert raised.status_code == 200, raised.text
            assert raised.json()["limits"] == {**raised.json()["limits"], "budget": "5 USD/day",
                                               "rate_per_min": 600.0, "models": ["kimi-k2.6"],
                                               "updated_by": "alice"}  # fmt: skip
            assert await chat(daemon) is None  # this daemon applies its own change at once
            # The console's operator view shows the budget that applies, and where from.
            seen = await daemon.core.reads.spend_all(Principal("alice"))
            [bob] = [b for b in seen["budgets"] if b["principal"] == "bob"]
            assert (bob["amount"], bob["from"]) == ("5", "limits")
            listed = (await http.get(url, headers=as_alice)).json()
            assert [p["principal"] for p in listed["principals"]] == ["bob"]
            assert listed["defaults"]["budgets"] == {"bob": "0.000001 USD/day"}
            assert (await http.delete(f"{url}/bob", headers=as_alice)).json() == {"cleared": True}
            assert (await http.get(f"{url}/bob", headers=as_alice)).status_code == 404
            assert await chat(daemon) == "BUDGET_EXCEEDED"
