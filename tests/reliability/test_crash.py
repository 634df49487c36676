"""SIGKILL while 50 conversations are mid-call: nothing answered is lost or stored
twice, every conversation goes on with its whole history, and every audit event
that reached the outbox is delivered to Supabase exactly once.

Fifty clients each hold a conversation and keep asking for turns; the provider
emulator answers each after 0.1 to 1.2 s, so the daemon is killed at a moment
when all fifty requests are waiting at the provider. After a restart on the same
data directory each client resumes its session and re-sends the call it lost
with the same ``request_id``, as a client retrying after a crash does (a
``request_id`` is unique within its session), then asks one more turn.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect

from exai.client import ClientError, ExaiClient
from exai.emulators.postgrest import PostgrestEmulator
from exai.emulators.provider import EmulatorServer
from tests.reliability.conftest import SUPABASE_KEY
from tests.reliability.harness import (
    DaemonProcess,
    outbox_ids,
    provider_env,
    scaled,
    supabase_env,
    wait_until,
)

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

TOKEN = "crash-token-4b1d0e"
MODEL = "kimi-k2.6"
CONVERSATIONS = 50
UNLUCKY = 5  # more conversations, whose last answer is stored but never read by the client


@dataclass
class Turn:
    request_id: str
    prompt: str
    answer: str | None = None


@dataclass
class Conversation:
    index: int
    session_id: str = ""  # of the connection that sent the call in flight
    thread_id: str = ""
    turns: list[Turn] = field(default_factory=list)  # answered, in order
    pending: Turn | None = None  # sent, unanswered when the daemon died

    async def ask(self, client: ExaiClient, turn: Turn) -> str:
        arguments = {"prompt": turn.prompt, "model": MODEL}
        if self.thread_id:
            arguments["continuation_id"] = self.thread_id
        res = await client.call("chat", arguments, request_id=turn.request_id, wait_s=60)
        assert res.error is None, res.error
        self.thread_id = self.thread_id or str(res.metadata.continuation_id)
        turn.answer = res.outputs[0].text
        return turn.answer


async def _converse(client: ExaiClient, conv: Conversation) -> None:
    """Ask turn after turn until the daemon dies under the call in flight."""
    rng = random.Random(conv.index)
    k = 2
    while True:
        latency = rng.randint(100, 1200)
        turn = Turn(
            f"c{conv.index}-t{k}",
            f"conversation {conv.index} turn {k} [emulate:latency_ms={latency}]",
        )
        conv.pending = turn
        try:
            await conv.ask(client, turn)
        except ClientError:
            return
        conv.turns.append(turn)
        conv.pending = None
        k += 1


async def _lose_answer(url: str, conv: Conversation) -> ClientConnection:
    """Ask turn 2 on a raw connection and never read the answer: a client that dies
    after the daemon stored the turn and before it saw the result."""
    turn = Turn(f"c{conv.index}-t2", f"conversation {conv.index} turn 2")
    conv.pending = turn
    ws = await connect(url, ping_interval=None)
    await ws.send(json.dumps({"op": "hello", "token": TOKEN}))
    conv.session_id = json.loads(await ws.recv())["session_id"]
    arguments = {"prompt": turn.prompt, "model": MODEL, "continuation_id": conv.thread_id}
    await ws.send(
        json.dumps(
            {
                "op": "call_tool",
                "request_id": turn.request_id,
                "name": "chat",
                "arguments": arguments,
            }
        )
    )
    return ws


def _stored_request_ids(sqlite_path: Path) -> set[str]:
    return {rid for rows in _stored_turns(sqlite_path).values() for rid, _, _ in rows}


def _stored_turns(sqlite_path: Path) -> dict[str, list[tuple[str, str, str]]]:
    """thread id -> [(request_id, role, content)] in stored order."""
    db = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT thread_id, request_id, role, content FROM messages ORDER BY thread_id, seq"
        ).fetchall()
    finally:
        db.close()
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for thread_id, request_id, role, content in rows:
        out[thread_id].append((request_id, role, content))
    return out


async def test_sigkill_mid_call_loses_nothing_answered_and_doubles_nothing(
    tmp_path: Path, emulator: EmulatorServer, postgrest: PostgrestEmulator, figures
) -> None:
    daemon = DaemonProcess(
        tmp_path,
        EXAI_WS_TOKEN=TOKEN,
        EXAI_RATE_LIMIT_PER_MIN="0",
        **provider_env(emulator),
        **supabase_env(postgrest, SUPABASE_KEY),
    ).start()
    outbox = daemon.data_dir / "audit-outbox.sqlite3"
    store = daemon.data_dir / "conversations.sqlite3"
    try:
        convs = [Conversation(i) for i in range(CONVERSATIONS + UNLUCKY)]
        clients = [ExaiClient(daemon.url, TOKEN, ping_interval=None) for _ in convs]
        await asyncio.gather(*(c.connect() for c in clients))
        for conv, client in zip(convs, clients, strict=True):
            conv.session_id = str(client.session_id)
        for conv in convs:
            conv.turns.append(Turn(f"c{conv.index}-t1", f"conversation {conv.index} turn 1"))
        await asyncio.gather(
            *(conv.ask(client, conv.turns[0]) for conv, client in zip(convs, clients, strict=True))
        )

        # --- the crash -------------------------------------------------------------------
        workers = [
            asyncio.create_task(_converse(client, conv))
            for conv, client in zip(convs[:CONVERSATIONS], clients, strict=False)
        ]
        unlucky = convs[CONVERSATIONS:]
        lost = [await _lose_answer(daemon.url, conv) for conv in unlucky]
        await wait_until(
            lambda: (
                {c.pending.request_id for c in unlucky if c.pending} <= _stored_request_ids(store)
            ),
            30,
            "unread answers stored",
        )
        target = scaled(200, minimum=60)

        def answered() -> int:
            for worker in workers:
                if worker.done():
                    worker.result()  # a conversation failed before the kill: say why
                    raise AssertionError("a conversation stopped before the kill")
            return sum(len(c.turns) for c in convs)

        def at_provider() -> int:
            answered()
            return sum(1 for r in emulator.requests if r["answered_at"] is None)

        await wait_until(
            lambda: answered() >= target + CONVERSATIONS, 120, "turns answered before the kill"
        )
        await wait_until(lambda: at_provider() >= CONVERSATIONS, 60, "all 50 calls at the provider")
        in_flight_at_kill = at_provider()
        daemon.kill()
        await asyncio.gather(*workers)
        await asyncio.gather(*(c.close() for c in clients), *(ws.close() for ws in lost))
        answered_before = sum(len(c.turns) for c in convs)
        pending = [c for c in convs if c.pending is not None]
        assert len(pending) == len(convs), "every conversation had a call in flight"
        outbox_at_kill = outbox_ids(outbox, "outbox") | outbox_ids(outbox, "archive")
        stored_at_kill = _stored_request_ids(store)
        stored_but_unanswered = sum(c.pending.request_id in stored_at_kill for c in pending)
        assert stored_but_unanswered >= UNLUCKY

        # --- restart, retry what was lost, continue ----------------------------------------
        started = time.monotonic()
        daemon.start()
        restart_s = time.monotonic() - started
        clients = [
            ExaiClient(daemon.url, TOKEN, session_id=conv.session_id, ping_interval=None)
            for conv in convs
        ]
        await asyncio.gather(*(c.connect() for c in clients))

        async def retry(conv: Conversation, client: ExaiClient) -> None:
            assert conv.pending is not None
            await conv.ask(client, conv.pending)
            conv.turns.append(conv.pending)
            conv.pending = None

        await asyncio.gather(*(retry(c, cl) for c, cl in zip(convs, clients, strict=True)))
        # The retry of a turn already stored is answered with what the store holds (the
        # first answer, made before the turn itself was history), not run into it again.
        for conv in unlucky:
            assert conv.turns[-1].answer is not None
            first = f"emulated reply #2 to: {conv.turns[-1].prompt} (saw 4 messages)"
            assert conv.turns[-1].answer == first, conv.turns[-1].answer

        stored = _stored_turns(store)
        duplicates = missing = 0
        for conv in convs:
            rows = stored[conv.thread_id]
            by_request: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for rid, role, content in rows:
                by_request[rid].append((role, content))
            duplicates += sum(1 for msgs in by_request.values() if len(msgs) != 2)
            missing += sum(1 for t in conv.turns if t.request_id not in by_request)
            assert list(by_request) == [t.request_id for t in conv.turns], conv.index
            for turn in conv.turns:
                assert by_request[turn.request_id] == [
                    ("user", turn.prompt),
                    ("assistant", turn.answer),
                ]
        assert duplicates == 0 and missing == 0

        async def final(conv: Conversation, client: ExaiClient) -> str:
            return await conv.ask(
                client, Turn(f"c{conv.index}-final", f"conversation {conv.index} final")
            )

        finals = await asyncio.gather(*(final(c, cl) for c, cl in zip(convs, clients, strict=True)))
        requests = {r["body"]["messages"][-1]["content"]: r for r in emulator.requests}
        for conv, answer in zip(convs, finals, strict=True):
            prompt = f"conversation {conv.index} final"
            users = [
                m["content"] for m in requests[prompt]["body"]["messages"] if m["role"] == "user"
            ]
            assert users == [t.prompt for t in conv.turns] + [prompt]
            assert f"(saw {1 + 2 * len(conv.turns) + 1} messages)" in answer
        await asyncio.gather(*(c.close() for c in clients))

        # --- the audit trail drains; then a clean stop -------------------------------------
        await wait_until(
            lambda: daemon.metrics().get("exai_audit_backlog") == 0, 60, "audit backlog shipped"
        )
        assert daemon.stop() == 0
        assert outbox_ids(outbox, "outbox") == set(), "events left undelivered"
        rows = [row["event_id"] for row in postgrest.rows("audit_events")]
        delivered = set(rows)
        assert len(rows) == len(delivered)
        assert outbox_at_kill <= delivered
        assert outbox_ids(outbox, "archive") <= delivered
        sent = [row["event_id"] for write in postgrest.writes() for row in write.rows]
        problems = daemon.log_problems()
        assert problems == [], problems[:5]
        figures.record(
            "crash",
            conversations=len(convs),
            in_flight_at_kill=in_flight_at_kill,
            answered_before_kill=answered_before,
            stored_but_unanswered=stored_but_unanswered,
            resent_after_restart=len(pending),
            unread_answers_arranged=UNLUCKY,
            turns_stored=sum(len(c.turns) + 1 for c in convs),
            duplicate_turns=duplicates,
            answered_missing=missing,
            conversations_continued=len(finals),
            outbox_events_at_kill=len(outbox_at_kill),
            events_delivered=len(delivered),
            events_lost=len(outbox_at_kill - delivered),
            duplicate_rows=len(rows) - len(delivered),
            redelivered_events=len(sent) - len(set(sent)),
            restart_s=round(restart_s, 2),
        )
    finally:
        daemon.stop()
