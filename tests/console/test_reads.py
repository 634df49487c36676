"""The console's reads (exai.port.Reads): a principal's own rows only, and the operator's
queries only for an operator."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from exai.auth import Principal
from exai.client import ExaiClient
from exai.errors import ForbiddenError
from tests.conftest import running_daemon
from tests.console.conftest import ALICE, BOB, console_settings

alice, bob = Principal("alice"), Principal("bob")


async def _daemon_with_alices_things(tmp_path, emulator):
    daemon_cm = running_daemon(console_settings(tmp_path, emulator))
    daemon = await daemon_cm.__aenter__()
    async with ExaiClient(daemon.url, ALICE) as client:
        first = await client.call(
            "chat", {"prompt": "the heron migration plan", "model": "kimi-k2.6"}
        )
        await client.call(
            "chat",
            {
                "prompt": "and the rollback",
                "model": "kimi-k2.6",
                "continuation_id": first.metadata.continuation_id,
            },
        )
        await client.call("chat", {"prompt": "unrelated weather talk", "model": "kimi-k2.6"})
        job = await client.call(
            "schedule",
            {"tool": "chat", "arguments": {"prompt": "x"}, "when": "0 3 * * *", "name": "nightly"},
        )
        memory = await client.call("remember", {"content": "prefers tabs over spaces"})
    await daemon.services.ledger.flush()
    ids = {
        "thread": first.metadata.continuation_id,
        "job": job.metadata.model_extra["job"]["id"],
        "memory": memory.metadata.model_extra["memory"]["id"],
    }
    return daemon_cm, daemon, ids


async def test_a_principal_reads_its_own_threads_jobs_memories_and_spend(tmp_path, emulator):
    cm, daemon, ids = await _daemon_with_alices_things(tmp_path, emulator)
    reads = daemon.core.reads
    try:
        threads = await reads.threads(alice)
        assert len(threads) == 2 and threads[0]["title"] == "unrelated weather talk"
        found = await reads.threads(alice, query="ROLLBACK")  # text of a later turn, any case
        assert [t["id"] for t in found] == [ids["thread"]]
        assert await reads.threads(alice, query="100%_") == []  # wildcards are literal
        thread = await reads.thread(alice, ids["thread"])
        assert [m["turn"] for m in thread["messages"]] == [1, 1, 2, 2]
        assert set(thread["costs"]) == {1, 3}  # each turn's own call, priced
        assert all(Decimal(c["USD"]) > 0 for c in thread["costs"].values())
        export = await reads.thread_export(alice, ids["thread"])
        assert export.count("\n") == 5 and "heron migration" in export
        assert [j["id"] for j in await reads.jobs(alice)] == [ids["job"]]
        assert (await reads.job(alice, ids["job"]))["name"] == "nightly"
        memories = await reads.memories(alice)
        assert memories["total"] == 1 and memories["memories"][0]["id"] == ids["memory"]
        assert (await reads.memory(alice, ids["memory"]))["content"] == "prefers tabs over spaces"
        spend = await reads.spend(alice, days=7)
        assert {line["key"] for line in spend["models"]} == {"kimi-k2.6"}
        assert {line["key"] for line in spend["tools"]} == {"chat"}
        assert [line["calls"] for line in spend["days"]] == [3]
        budget = spend["budget"]
        assert budget["amount"] == "5" and budget["currency"] == "USD"
        assert Decimal(budget["spent"]) + Decimal(budget["left"]) == Decimal(5)
        assert Decimal(budget["spent"]) == sum(Decimal(line["cost"]) for line in spend["days"])
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_page_of_a_thread_holds_whole_turns_and_says_when_it_is_not_all(tmp_path, emulator):
    cm, daemon, ids = await _daemon_with_alices_things(tmp_path, emulator)
    try:
        cut = await daemon.core.reads.thread(alice, ids["thread"], max_messages=3)
        assert [m["seq"] for m in cut["messages"]] == [3, 4]  # not turn 1's answer alone
        assert not cut["complete"] and set(cut["costs"]) == {1, 3}
        one = await daemon.core.reads.thread(alice, ids["thread"], max_messages=1)
        assert [m["seq"] for m in one["messages"]] == [4]  # a turn longer than the page
        whole = await daemon.core.reads.thread(alice, ids["thread"], max_messages=4)
        assert [m["seq"] for m in whole["messages"]] == [1, 2, 3, 4] and whole["complete"]
        assert whole["cost"] == {"USD": str(sum(Decimal(c["USD"]) for c in cut["costs"].values()))}
        assert whole["lineage"] == {"parent": None, "follows": None, "followers": [], "forks": []}
        bare = await daemon.core.reads.thread(alice, ids["thread"], details=False)
        assert set(bare) == {"thread"} and bare["thread"]["face"] is None
        listed = await daemon.core.reads.threads(alice, costs=True)
        assert {t["id"]: t["cost"] for t in listed}[ids["thread"]] == whole["cost"]
        assert await daemon.core.reads.threads(alice, kind="agent") == []
        assert len(await daemon.core.reads.threads(alice, kind="chat")) == 2
    finally:
        await cm.__aexit__(None, None, None)


async def test_another_principal_reads_none_of_it(tmp_path, emulator):
    cm, daemon, ids = await _daemon_with_alices_things(tmp_path, emulator)
    reads = daemon.core.reads
    try:
        assert await reads.threads(bob) == [] and await reads.threads(bob, query="heron") == []
        assert await reads.thread(bob, ids["thread"]) is None
        assert await reads.thread_export(bob, ids["thread"]) is None
        assert await reads.jobs(bob) == [] and await reads.job(bob, ids["job"]) is None
        assert (await reads.memories(bob))["total"] == 0
        assert await reads.memory(bob, ids["memory"]) is None
        spend = await reads.spend(bob)
        assert spend["days"] == spend["models"] == spend["tools"] == [] and spend["budget"] is None
        assert await reads.thread(bob, "not-a-uuid") is None
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_operators_reads_need_the_admin_scope(tmp_path, emulator):
    cm, daemon, _ = await _daemon_with_alices_things(tmp_path, emulator)
    reads = daemon.core.reads
    try:
        for who in (bob, Principal("mallory", scopes=frozenset({"*"}))):
            assert not reads.is_admin(who)
            with pytest.raises(ForbiddenError, match="not an operator"):
                await reads.spend_all(who)
            with pytest.raises(ForbiddenError):
                await reads.audit_events(who)
            with pytest.raises(ForbiddenError):
                await reads.health(who)
            with pytest.raises(ForbiddenError):
                reads.settings_view(who)
        scoped = Principal("carol", scopes=frozenset({"exai:admin"}), method="jwt")
        for operator in (alice, scoped):  # named by EXAI_ADMIN_PRINCIPALS, or by its scope
            everyone = await reads.spend_all(operator)
            assert [line["key"] for line in everyone["principals"]] == ["alice"]
            assert everyone["budgets"][0]["principal"] == "alice"
            health = await reads.health(operator)
            assert health["ready"] and {"store", "audit", "providers"} <= set(health["checks"])
            shown = reads.settings_view(operator)
            assert shown["EXAI_WS_TOKENS"] == "****" and ALICE not in str(shown)
    finally:
        await cm.__aexit__(None, None, None)


async def test_the_audit_trail_filters_by_kind_principal_and_text(tmp_path, emulator):
    cm, daemon, _ = await _daemon_with_alices_things(tmp_path, emulator)
    reads = daemon.core.reads
    try:
        async with ExaiClient(daemon.url, BOB) as client:
            await client.call("echo", {"text": "bob was here"})
        for _ in range(100):  # the trail moves events to its outbox every 0.2 s
            found = await reads.audit_events(alice, kind="call_finished", who="bob")
            if found["events"]:
                break
            await asyncio.sleep(0.05)
        events = found["events"]
        assert events and all(
            e["kind"] == "call_finished" and e["principal"] == "bob" for e in events
        )
        alices = (await reads.audit_events(alice, who="alice", limit=500))["events"]
        assert alices and {e["principal"] for e in alices} == {"alice"}
        assert [e["ts"] for e in alices] == sorted((e["ts"] for e in alices), reverse=True)
        schedule = (await reads.audit_events(alice, text="SCHEDULE"))["events"]
        assert schedule and all("schedule" in str(e).lower() for e in schedule)
        older = await reads.audit_events(alice, before=alices[0]["ts"], who="alice", limit=500)
        assert [e["event_id"] for e in older["events"]] == [e["event_id"] for e in alices[1:]]
    finally:
        await cm.__aexit__(None, None, None)
