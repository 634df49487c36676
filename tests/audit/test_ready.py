"""/ready and the audit trail: not ready while events are dropped, ready again once the
backlog drains, and after a restart; the lifetime drop count stays in /metrics."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from exai.audit.readiness import DROPPING_WINDOW_S, audit_check
from exai.emulators.postgrest import PostgrestEmulator
from tests.conftest import make_settings as daemon_settings
from tests.conftest import running_daemon

from .conftest import SERVICE_KEY
from .helpers import wait_until

LIMIT = 20


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def _ready(daemon) -> tuple[int, dict]:
    status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{daemon.port}/ready")
    return status, json.loads(body)["checks"]["audit"]


async def _dropped_metric(daemon) -> float:
    _, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{daemon.port}/metrics")
    [line] = [line for line in body.splitlines() if line.startswith("exai_audit_dropped ")]
    return float(line.split()[1])


def _settings(tmp_path, postgrest: PostgrestEmulator):
    return daemon_settings(
        tmp_path, audit_enabled=True, audit_sink="supabase", supabase_url=postgrest.url,
        supabase_service_role_key=SERVICE_KEY, audit_max_outbox_events=LIMIT,
        audit_flush_interval_s=0.01, audit_ship_interval_s=0.01,
    )  # fmt: skip


async def _fill_past_the_limit(daemon) -> None:
    audit = daemon.services.audit
    for i in range(LIMIT + 10):
        daemon.core.emit("call_started", request_id=f"r{i}")
    await wait_until(lambda: audit.stats()["buffered"] == 0 and audit.stats()["dropped"] >= 10)


async def test_dropping_makes_the_daemon_unready_until_the_backlog_drains_and_the_window_passes(
    tmp_path, postgrest: PostgrestEmulator
) -> None:
    settings = _settings(tmp_path, postgrest)
    postgrest.refuse()
    clock = Clock()
    async with running_daemon(settings) as daemon:
        audit = daemon.services.audit
        audit.clock = clock
        assert (await _ready(daemon))[0] == 200
        await _fill_past_the_limit(daemon)
        status, check = await _ready(daemon)
        assert status == 503 and check["ok"] is False and "outbox limit" in check["reason"]

        postgrest.healthy()
        await wait_until(lambda: audit.stats()["backlog"] == 0)
        status, check = await _ready(daemon)
        assert status == 503 and "dropped" in check["reason"]  # still within the window
        clock.now += DROPPING_WINDOW_S
        status, check = await _ready(daemon)
        assert status == 200 and check["ok"] is True
        dropped = audit.stats()["dropped"]
        assert check["dropped"] == dropped and await _dropped_metric(daemon) == dropped

    async with running_daemon(settings) as restarted:
        status, check = await _ready(restarted)
        assert status == 200 and check["ok"] is True
        assert check["dropped"] == dropped  # the lifetime count, from the outbox
        assert await _dropped_metric(restarted) == dropped


async def test_a_restart_with_the_backlog_at_the_limit_is_unready_until_it_drains(
    tmp_path, postgrest: PostgrestEmulator
) -> None:
    settings = _settings(tmp_path, postgrest)
    postgrest.refuse()
    async with running_daemon(settings) as daemon:
        await _fill_past_the_limit(daemon)

    async with running_daemon(settings) as restarted:
        status, check = await _ready(restarted)
        assert status == 503 and check["backlog"] == LIMIT and "outbox limit" in check["reason"]
        postgrest.healthy()
        audit = restarted.services.audit
        await wait_until(lambda: audit.stats()["backlog"] == 0)
        status, check = await _ready(restarted)
        assert status == 200 and check["dropped"] >= 10


def test_the_check_counts_quarantine_towards_the_limit_and_ignores_lifetime_drops() -> None:
    base = {"enabled": True, "backlog": 0, "quarantined": 0, "dropped": 500,
            "last_drop_age_s": None, "max_outbox_events": 10}  # fmt: skip
    assert audit_check(base)["ok"] is True
    assert audit_check({**base, "backlog": 6, "quarantined": 4})["ok"] is False
    assert audit_check({**base, "backlog": 9})["ok"] is True
    assert audit_check({**base, "last_drop_age_s": DROPPING_WINDOW_S - 1})["ok"] is False
    assert audit_check({**base, "last_drop_age_s": DROPPING_WINDOW_S})["ok"] is True
    assert audit_check({**base, "enabled": False, "backlog": 10})["ok"] is True
