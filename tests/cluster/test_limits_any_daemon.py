"""A budget raised at run time with ``exai limits``: refused on both daemons sharing
Postgres, then served on both without a restart, then refused again when cleared.

Two daemons in this process share one real Postgres database; the real ``exai``
console script writes the limits to it as an operator would."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from exai.app import App
from exai.client import ExaiClient
from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from tests.cli.helpers import clean_env, run_exai
from tests.conftest import emulated_providers, make_settings, running_daemon

pytestmark = pytest.mark.timeout(90)

BOB = "bob-token-0123456789"


async def _chat(daemon: App) -> Any:
    client = ExaiClient(daemon.url, BOB)
    await client.connect()
    try:
        return await client.call("chat", {"prompt": "hello", "model": "kimi-k2.6"}, timeout_s=30)
    finally:
        await client.close()


async def _until(daemons: list[App], code: str | None) -> list[Any]:
    """Ask each daemon until it answers with ``code`` (None: served); bounded, so a
    change never seen fails the test rather than hanging it."""
    results = []
    for daemon in daemons:
        for _ in range(200):
            result = await _chat(daemon)
            if (result.error.code if result.error else None) == code:
                break
            await asyncio.sleep(0.05)
        results.append(result)
    return results


async def test_a_budget_hit_is_raised_with_the_cli_and_served_on_both_daemons(
    tmp_path: Path, emulator: EmulatorServer, postgres_server: TempPostgres
) -> None:
    url = postgres_server.create_database(f"limits_{uuid.uuid4().hex[:8]}")
    common = {**emulated_providers(emulator), "ws_tokens": f"bob={BOB}", "store_url": url,
              "memory_enabled": False, "budgets": "bob=0.000001 USD/day",
              "limits_poll_s": 0.1}  # fmt: skip
    env = clean_env(tmp_path, EXAI_STORE_URL=url)
    async with (
        running_daemon(make_settings(tmp_path / "d1", **common)) as one,
        running_daemon(make_settings(tmp_path / "d2", **common)) as two,
    ):
        for result in [await _chat(one), await _chat(two)]:
            assert result.error is not None and result.error.code == "BUDGET_EXCEEDED"
            assert result.error.message.startswith(
                "principal 'bob' has spent 0 USD of its budget of 0.000001 USD per UTC day"
            )
        assert emulator.requests == []

        ran = await run_exai("limits", "set", "--principal", "bob", "--budget", "5 USD/day",
                             "--rate", "600/min", env=env)  # fmt: skip
        assert ran.code == 0, ran.err
        assert "budget 5 USD/day; rate 600/min; models all" in ran.err + ran.out
        served = await _until([one, two], None)
        assert [r.error for r in served] == [None, None]
        assert all(r.metadata.model == "kimi-k2.6" for r in served)

        listed = await run_exai("limits", "list", "--json", env=env)
        assert listed.code == 0, listed.err
        assert '"budget": "5 USD/day"' in listed.out and '"rate_per_min": 600.0' in listed.out

        cleared = await run_exai("limits", "clear", "--principal", "bob", env=env)
        assert cleared.code == 0, cleared.err
        refused = await _until([one, two], "BUDGET_EXCEEDED")
        assert [r.error.code for r in refused if r.error] == ["BUDGET_EXCEEDED"] * 2
