"""Readiness under audit loss: /ready follows the audit trail's drops, and no event
goes missing unseen.

An in-process daemon (``tests/conftest.py``'s ``running_daemon``) ships its audit
trail to the PostgREST stand-in, which goes down in turn three ways (refusing
connections, answering 503, hanging) while echo calls fill the outbox to
``EXAI_AUDIT_MAX_OUTBOX_EVENTS``, over and over, then across restarts. The 60 s
window after the last drop is crossed by moving the trail's clock on, as
``tests/audit/test_ready.py`` does.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from exai.audit.readiness import DROPPING_WINDOW_S
from exai.client import ExaiClient
from exai.emulators.postgrest import PostgrestEmulator
from tests.conftest import make_settings, running_daemon
from tests.reliability.conftest import SUPABASE_KEY
from tests.reliability.harness import scaled, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

READY_SECTION = "attack_faces_readiness"
TOKEN = "readiness-attack-token-0b4d92"
LIMIT = 200  # EXAI_AUDIT_MAX_OUTBOX_EVENTS of these daemons
OUTAGES = ["refused", "failing", "hanging"]  # how the sink is down, in turn


class ShiftedClock:
    """The audit trail's monotonic clock, which the test moves on past the window."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def _sink_down(postgrest: PostgrestEmulator, how: str) -> None:
    if how == "refused":
        postgrest.refuse()
    elif how == "failing":
        postgrest.fail(503)
    else:
        postgrest.hang()


async def _ready(daemon: Any) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(f"http://127.0.0.1:{daemon.port}/ready",
                                headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
    return answer.status_code, answer.json()["checks"]["audit"]


async def _drops(daemon: Any, client: ExaiClient, tally: Counter[str], enough: int,
                 ready: dict[str, Counter[int]] | None = None) -> None:  # fmt: skip
    """Echo calls, 20 at a time, until the trail has dropped ``enough`` more events,
    reading /ready after each batch: ``filling`` while the outbox was well below its
    limit, ``while_dropping`` once an event was dropped."""
    audit = daemon.services.audit
    start = audit.stats()["dropped"]
    while audit.stats()["dropped"] < start + enough:
        results = await asyncio.gather(*(client.call("echo", {"text": f"e{i}"})
                                         for i in range(20)))  # fmt: skip
        tally["echo_calls"] += len(results)
        tally.update(f"echo_failed_{r.error.code.value}" for r in results if r.error)
        stats = audit.stats()
        if ready is not None and stats["dropped"] > start:
            ready["while_dropping"][(await _ready(daemon))[0]] += 1
        elif ready is not None and stats["backlog"] + stats["quarantined"] < LIMIT - 60:
            ready["filling"][(await _ready(daemon))[0]] += 1
        assert tally["echo_calls"] < 100 * LIMIT, "the outbox never filled"


def _accounted(stats: dict[str, Any]) -> int:
    """Every event the trail has taken: shipped, waiting, quarantined or dropped."""
    return sum(int(stats[k]) for k in ("shipped", "backlog", "quarantined", "dropped"))


def _audit_settings(workdir: Path, postgrest: PostgrestEmulator) -> Any:
    return make_settings(workdir, ws_tokens=f"alice={TOKEN}", audit_enabled=True,
                         audit_sink="supabase", supabase_url=postgrest.url,
                         supabase_service_role_key=SUPABASE_KEY,
                         audit_max_outbox_events=LIMIT, audit_flush_interval_s=0.02,
                         audit_ship_interval_s=0.05, rate_limit_per_min=0)  # fmt: skip


async def test_readiness_follows_audit_loss(tmp_path: Path, postgrest, figures):
    """A sink down long enough to fill the outbox to ``EXAI_AUDIT_MAX_OUTBOX_EVENTS``
    (refusing connections, answering 503, or hanging, in turn), under echo calls:
    /ready is 503 from the first event dropped, stays 503 once the sink is back and
    the backlog has drained until the 60 s window has passed (the trail's clock is
    moved on), then 200; the calls never fail. Then the same across restarts: a
    daemon started on an outbox at the limit is 503 until it drains, and one started
    on a drained outbox is 200. Every event was delivered or counted as dropped:
    while cycling, the events emitted equal those shipped, waiting or dropped, and at
    the end the backlog is empty and the sink holds as many distinct events as the
    outbox counts shipped."""
    settings = _audit_settings(tmp_path, postgrest)
    cycles = scaled(6, minimum=3)
    tally: Counter[str] = Counter()
    ready: dict[str, Counter[int]] = {"cycle_start": Counter(), "filling": Counter(),
                                      "while_dropping": Counter(),
                                      "drained_in_window": Counter(),
                                      "after_window": Counter()}  # fmt: skip
    clock = ShiftedClock()
    async with running_daemon(settings) as daemon:
        audit = daemon.services.audit
        audit.clock = clock
        emit, emitted = audit.emit, Counter[str]()

        def counted(kind: str, /, **fields: Any) -> None:
            emitted[kind] += 1
            emit(kind, **fields)

        audit.emit = counted  # every event from here on is counted
        before = _accounted(audit.stats())
        async with ExaiClient(daemon.url, TOKEN) as client:
            for cycle in range(cycles):
                ready["cycle_start"][(await _ready(daemon))[0]] += 1
                how = OUTAGES[cycle % len(OUTAGES)]
                _sink_down(postgrest, how)
                await _drops(daemon, client, tally, 200, ready)
                postgrest.healthy()
                await wait_until(lambda: audit.stats()["backlog"] == 0, 120, "backlog drained")
                ready["drained_in_window"][(await _ready(daemon))[0]] += 1
                clock.offset += DROPPING_WINDOW_S
                ready["after_window"][(await _ready(daemon))[0]] += 1
                tally[f"cycles_sink_{how}"] += 1
        # The client's leaving is an event too; once it is in, the sums must meet.
        await wait_until(lambda: emitted["connection_closed"] == 1, 10, "the client gone")
        await wait_until(lambda: _accounted(audit.stats()) - before == sum(emitted.values()),
                         10, "every event emitted shipped, waiting or dropped")  # fmt: skip
        accounted = _accounted(audit.stats()) - before
    restarts: dict[str, Any] = {}
    _sink_down(postgrest, "refused")
    async with running_daemon(settings) as daemon, ExaiClient(daemon.url, TOKEN) as client:
        await _drops(daemon, client, tally, 20)
    async with running_daemon(settings) as daemon:  # on an outbox at the limit
        daemon.services.audit.clock = clock
        status, check = await _ready(daemon)
        restarts["at_the_limit"] = f"{status}, backlog {check['backlog']}"
        assert status == 503 and check["backlog"] >= LIMIT, check
        postgrest.healthy()
        await wait_until(lambda: daemon.services.audit.stats()["backlog"] == 0, 120, "drained")
        status, check = await _ready(daemon)
        restarts["drained"] = status
        assert status == 200, check
    async with running_daemon(settings) as daemon:  # on a drained outbox
        status, check = await _ready(daemon)
        restarts["started_drained"] = status
        stats = daemon.services.audit.stats()
    delivered = {row["event_id"] for row in postgrest.rows("audit_events")}
    written = [row["event_id"] for write in postgrest.writes("audit_events")
               if 200 <= write.status < 300 for row in write.rows]  # fmt: skip
    figures.record(READY_SECTION, cycles=cycles, limit=LIMIT, **tally,
                   ready={k: dict(sorted(v.items())) for k, v in ready.items()},
                   restarts=restarts, events_emitted_while_cycling=dict(emitted),
                   events_accounted_for_while_cycling=accounted,
                   events_delivered=len(delivered),
                   events_dropped=stats["dropped"], events_shipped=stats["shipped"],
                   events_written_again=len(written) - len(set(written)))  # fmt: skip
    assert not [k for k in tally if k.startswith("echo_failed")], tally
    assert ready["cycle_start"] == {200: cycles} and ready["after_window"] == {200: cycles}
    assert set(ready["while_dropping"]) == {503} and ready["drained_in_window"] == {503: cycles}
    assert set(ready["filling"]) == {200}
    assert status == 200 and stats["backlog"] == 0 and stats["quarantined"] == 0
    assert len(delivered) == stats["shipped"]
    assert accounted == sum(emitted.values()), (accounted, emitted)  # none lost unseen
