"""The shipped spend views, on a real Postgres, over call_finished events as the
daemon writes them (their ``charges``, from :func:`exai.accounting.ledger.charge_fields`)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from exai.accounting.ledger import Charge, charge_fields
from exai.audit.events import new_event
from exai.audit.postgres_sink import PostgresSink
from exai.providers.base import Usage
from exai.providers.pricing import Cost

MIGRATIONS = sorted((Path(__file__).parents[2] / "supabase" / "migrations").glob("*_audit_*.sql"))


@pytest.fixture(scope="module")
def pg() -> Iterator[object]:
    try:
        from exai.emulators.postgres import TempPostgres

        server = TempPostgres().start()
    except (ImportError, RuntimeError) as exc:
        pytest.skip(f"no local Postgres: {exc}")
    yield server
    server.stop()


def call(principal: str, tool: str, rid: str, *charges: Charge) -> dict:
    fields = {"principal": principal, "tool": tool, "request_id": rid, "status": "ok"}
    return new_event("call_finished", "i", {**fields, **charge_fields(charges)})


def charge(model: str, cost: str | None, currency: str = "USD") -> Charge:
    priced = None if cost is None else Cost(currency, input=Decimal(cost))
    usage = Usage(prompt_tokens=100, cached_prompt_tokens=25, completion_tokens=10)
    return Charge(model, "kimi", usage, priced)


async def test_views_chart_spend_per_day_principal_tool_and_model(pg) -> None:
    url = pg.create_database("audit_spend")  # type: ignore[attr-defined]
    conn = await asyncpg.connect(url)
    for path in MIGRATIONS:
        await conn.execute(path.read_text())
    sink = PostgresSink(url)
    await sink.send([
        call("alice", "chat", "r1", charge("k2", "0.25")),
        call("alice", "consensus", "r2", charge("k2", "0.5"), charge("glm", "3", "CNY"),
             charge("turbo", "0.125")),
        call("bob", "chat", "r3", charge("k2", None)),
        new_event("call_finished", "i", {"principal": "bob", "tool": "version"}),  # no model
    ])  # fmt: skip
    await sink.close()
    try:
        per_principal = {
            (r["principal"], r["currency"]): (r["model_calls"], r["cost"])
            for r in await conn.fetch("SELECT * FROM audit_spend_per_principal_daily")
        }
        assert per_principal == {
            ("alice", "USD"): (3, Decimal("0.875")),
            ("alice", "CNY"): (1, Decimal(3)),
            ("bob", None): (1, None),
        }
        per_tool = {
            (r["tool"], r["currency"]): r["tool_calls"]
            for r in await conn.fetch("SELECT * FROM audit_spend_per_tool_daily")
        }
        assert per_tool == {("chat", "USD"): 1, ("consensus", "USD"): 1, ("consensus", "CNY"): 1,
                            ("chat", None): 1}  # fmt: skip
        k2 = await conn.fetchrow(
            "SELECT * FROM audit_spend_per_model_daily WHERE model = 'k2' AND currency = 'USD'"
        )
        assert (k2["model_calls"], k2["cost"], k2["cached_share"]) == (2, Decimal("0.75"),
                                                                       Decimal("0.25"))  # fmt: skip
    finally:
        await conn.close()
