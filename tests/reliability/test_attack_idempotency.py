"""Attacks on idempotency: what a ``request_id`` names, and what a retry may be given.

A retry is the same call, in the same session, under the same ``request_id``;
the daemon answers it with what the first one produced and never runs it twice.
Anything else must never be taken for a retry. Each attack runs against real
``exai serve`` processes and the provider emulator, which records every request
it receives, so a call answered without the provider shows as no request:

* **ids reused across sessions**: many sessions continue shared threads, each
  numbering its requests "1", "2", ... like the minimal client in
  docs/protocol.md. Every turn must be stored and answered as its own; then each
  session's retries (before and after a restart) must be answered without the
  provider, and another call under a used id refused;
* **kill after store**: conversations whose first turn is stored while the
  client never reads the answer; SIGKILL, restart, and every client resumes its
  session and sends the call again. One thread per conversation, the stored
  answer, no provider call; on SQLite and on Postgres;
* **narrower token**: a token limited to ``["echo"]`` for the same principal
  resumes a session of an unrestricted token and re-sends its ``chat`` calls,
  finished and running: refused, nothing of theirs returned;
* **replay memory**: 2 sessions x 1,000 results of 49 KB; the replay cache holds
  no more than ``EXAI_REPLAY_MAX_BYTES``, and once the sessions end their memory
  goes back to the system (daemon RSS, measured with psutil).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import jwt
import pytest
from websockets.asyncio.client import ClientConnection, connect

from exai.client import ExaiClient
from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from exai.protocol import ErrorCode
from exai.store.base import ANY_OWNER, ConversationStore
from exai.store.postgres import PostgresStore
from exai.store.sqlite import SqliteStore
from tests.reliability.harness import DaemonProcess, provider_env, scaled, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

SECTION = "idempotency"
TOKEN = "idem-token-5c2e9a"
MODEL = "kimi-k2.6"
JWT_SECRET = "idem-jwt-secret-8d1f4b7a2c9e0f3a6b5d8c1e4f7a0b3d"
MIB = 1024 * 1024


def _chat(prompt: str, thread: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"prompt": prompt, "model": MODEL}
    if thread is not None:
        arguments["continuation_id"] = thread
    return arguments


def _problems(daemon: DaemonProcess) -> None:
    problems = daemon.log_problems()
    assert problems == [], problems[:5]


async def _open_store(daemon: DaemonProcess, url: str | None) -> ConversationStore:
    if url is None:
        return await SqliteStore.open(daemon.data_dir / "conversations.sqlite3")
    return await PostgresStore.open(url)


# --- request ids reused across sessions ----------------------------------------------------


async def test_request_ids_reused_across_sessions_never_lose_a_turn(
    tmp_path: Path, emulator: EmulatorServer, figures
) -> None:
    n_threads, n_sessions, per_session = scaled(10, 2), scaled(40, 4), scaled(5, 2)
    daemon = DaemonProcess(tmp_path, EXAI_WS_TOKEN=TOKEN, EXAI_RATE_LIMIT_PER_MIN="0",
                           **provider_env(emulator)).start()  # fmt: skip
    try:
        # Each shared thread is started by a session of its own, with request_id "1".
        threads: list[str] = []
        for t in range(n_threads):
            async with ExaiClient(daemon.url, TOKEN, ping_interval=None) as founder:
                res = await founder.call("chat", _chat(f"thread {t} opens"), request_id="1")
                assert res.error is None, res.error
                threads.append(str(res.metadata.continuation_id))
        sent: dict[str, str] = {}  # prompt -> the answer it got
        old_answers = 0
        sessions: list[tuple[str, str, dict[str, Any], str]] = []  # last call of each session

        async def session(s: int) -> None:
            nonlocal old_answers
            async with ExaiClient(daemon.url, TOKEN, ping_interval=None) as client:
                last: tuple[str, dict[str, Any], str] | None = None
                for k in range(per_session):
                    thread = threads[(s + k) % n_threads]
                    prompt = f"session {s} turn {k} on {thread[:8]}"
                    arguments = _chat(prompt, thread)
                    res = await client.call("chat", arguments, request_id=str(k + 1))
                    assert res.error is None, res.error
                    answer = res.outputs[0].text
                    if res.metadata.replayed or prompt not in answer:
                        old_answers += 1
                    sent[prompt] = answer
                    last = (str(k + 1), arguments, answer)
                assert last is not None
                sessions.append((str(client.session_id), *last))

        provider_before = len(emulator.requests)
        await asyncio.gather(*(session(s) for s in range(n_sessions)))
        provider_for_new_turns = len(emulator.requests) - provider_before

        # Retries: the same call under the same id in the same session, while the daemon
        # still has the result, then after a restart that empties its replay cache.
        retries = retry_mismatches = refused = 0
        provider_before = len(emulator.requests)
        for restart in (False, True):
            if restart:
                daemon.stop()
                daemon.start()
            for session_id, rid, arguments, answer in sessions:
                async with ExaiClient(daemon.url, TOKEN, session_id=session_id,
                                      ping_interval=None) as client:  # fmt: skip
                    again = await client.call("chat", arguments, request_id=rid)
                    retries += 1
                    if again.error is not None or not again.metadata.replayed or (
                        again.outputs[0].text != answer
                    ):  # fmt: skip
                        retry_mismatches += 1
                    other = await client.call("chat", {**arguments, "prompt": "a new question"},
                                              request_id=rid)  # fmt: skip
                    if other.error is not None and other.error.code == ErrorCode.REQUEST_ID_REUSED:
                        refused += 1
        provider_for_retries = len(emulator.requests) - provider_before
        daemon.stop()

        store = await _open_store(daemon, None)
        try:
            stored: Counter[str] = Counter()
            answers: dict[str, str] = {}
            for thread in threads:
                messages = await store.messages(thread, ANY_OWNER)
                for user, assistant in zip(messages[::2], messages[1::2], strict=True):
                    stored[str(user.content)] += 1
                    answers[str(user.content)] = str(assistant.content)
        finally:
            await store.aclose()
        lost = sum(1 for prompt in sent if stored[prompt] == 0)
        doubled = sum(1 for prompt in sent if stored[prompt] > 1)
        wrong = sum(1 for prompt, answer in sent.items() if answers.get(prompt) != answer)
        figures.record(
            SECTION,
            reuse_sessions=n_sessions,
            reuse_threads=n_threads,
            reuse_turns=len(sent),
            reuse_turns_lost=lost,
            reuse_turns_doubled=doubled,
            reuse_old_answers=old_answers,
            reuse_answers_not_as_stored=wrong,
            reuse_provider_calls=f"{provider_for_new_turns} for {len(sent)} new turns",
            reuse_retries=retries,
            reuse_retries_not_replayed=retry_mismatches,
            reuse_retries_provider_calls=provider_for_retries,
            reuse_other_calls_refused=f"{refused} of {retries}",
        )
        assert len(sent) == n_sessions * per_session
        assert (lost, doubled, wrong, old_answers) == (0, 0, 0, 0)
        assert provider_for_new_turns == len(sent)
        assert retry_mismatches == 0 and provider_for_retries == 0 and refused == retries
        _problems(daemon)
    finally:
        daemon.stop()


# --- kill after store, on both backends ---------------------------------------------------


async def _ask_and_never_read(url: str, prompt: str) -> tuple[str, ClientConnection]:
    """A first turn sent by a client that dies before it reads the answer."""
    ws = await connect(url, ping_interval=None)
    await ws.send(json.dumps({"op": "hello", "token": TOKEN}))
    session_id = json.loads(await ws.recv())["session_id"]
    await ws.send(json.dumps({"op": "call_tool", "request_id": "1", "name": "chat",
                              "arguments": _chat(prompt)}))  # fmt: skip
    return session_id, ws


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_first_turn_retried_after_a_kill_finds_its_thread(
    tmp_path: Path, emulator: EmulatorServer, request: pytest.FixtureRequest, backend: str, figures
) -> None:
    n = scaled(20, 4)
    url: str | None = None
    env = {"EXAI_WS_TOKEN": TOKEN, "EXAI_RATE_LIMIT_PER_MIN": "0", **provider_env(emulator)}
    if backend == "postgres":
        server: TempPostgres = request.getfixturevalue("postgres_server")
        url = server.create_database(f"idem_{uuid.uuid4().hex[:8]}")
        env["EXAI_STORE_URL"] = url
    daemon = DaemonProcess(tmp_path, **env).start()
    store = await _open_store(daemon, url)
    try:
        prompts = [f"conversation {i} begins" for i in range(n)]
        lost = [await _ask_and_never_read(daemon.url, p) for p in prompts]

        async def all_stored() -> bool:
            return len(await store.list_threads("default", limit=1000)) == n

        await wait_until(all_stored, 60, "every first turn stored")
        threads_before = {t.title: t.id for t in await store.list_threads("default", limit=1000)}
        daemon.kill()
        await asyncio.gather(*(ws.close() for _, ws in lost), return_exceptions=True)
        daemon.start()

        provider_before = len(emulator.requests)
        replayed = same_thread = 0
        clients = [ExaiClient(daemon.url, TOKEN, session_id=sid, ping_interval=None)
                   for sid, _ in lost]  # fmt: skip
        await asyncio.gather(*(c.connect() for c in clients))
        retried = await asyncio.gather(*(
            c.call("chat", _chat(p), request_id="1") for c, p in zip(clients, prompts, strict=True)
        ))  # fmt: skip
        provider_for_retries = len(emulator.requests) - provider_before
        for prompt, res in zip(prompts, retried, strict=True):
            assert res.error is None, res.error
            replayed += bool(res.metadata.replayed) and prompt in res.outputs[0].text
            same_thread += res.metadata.continuation_id == threads_before[prompt]
        # Each conversation goes on with one copy of its first turn in its history.
        nexts = await asyncio.gather(*(
            c.call("chat", _chat(f"{p}, and goes on", str(r.metadata.continuation_id)))
            for c, p, r in zip(clients, prompts, retried, strict=True)
        ))  # fmt: skip
        continued = sum("(saw 4 messages)" in r.outputs[0].text for r in nexts)
        await asyncio.gather(*(c.close() for c in clients))
        threads_after = await store.list_threads("default", limit=1000)
        duplicated = len(threads_after) - n
        figures.record(
            SECTION,
            **{
                f"kill_{backend}_conversations": n,
                f"kill_{backend}_threads_duplicated": duplicated,
                f"kill_{backend}_stored_answer": replayed,
                f"kill_{backend}_first_thread": same_thread,
                f"kill_{backend}_provider_calls": provider_for_retries,
                f"kill_{backend}_continued": continued,
            },
        )
        assert duplicated == 0 and replayed == same_thread == continued == n
        assert provider_for_retries == 0
        _problems(daemon)
    finally:
        await store.aclose()
        daemon.stop()


# --- a narrower token resuming a wider one's session ---------------------------------------


def _token(scopes: list[str] | None = None) -> str:
    claims: dict[str, Any] = {"sub": "dave", "exp": int(time.time()) + 3600}
    if scopes is not None:
        claims["scopes"] = scopes
    return jwt.encode(claims, JWT_SECRET, "HS256")


async def test_a_narrower_token_gets_nothing_of_a_wider_tokens_session(
    tmp_path: Path, emulator: EmulatorServer, figures
) -> None:
    daemon = DaemonProcess(tmp_path, EXAI_JWT_SECRET=JWT_SECRET, EXAI_RATE_LIMIT_PER_MIN="0",
                           **provider_env(emulator)).start()  # fmt: skip
    try:
        wide = ExaiClient(daemon.url, _token(), ping_interval=None)
        await wide.connect()
        session = str(wide.session_id)
        done_args = _chat("DAVE-PRIVATE-QUESTION")
        done = await wide.call("chat", done_args, request_id="done")
        assert done.error is None, done.error
        running_args = _chat("DAVE-SLOW-QUESTION [emulate:latency_ms=3000]")
        running = asyncio.create_task(wide.call("chat", running_args, request_id="running"))

        def at_provider() -> bool:
            return any("DAVE-SLOW" in json.dumps(r["body"]) for r in emulator.requests)

        await wait_until(at_provider, 10, "slow call at the provider")

        refused = leaked = 0
        received: list[str] = []
        async with ExaiClient(daemon.url, _token(["echo"]), session_id=session,
                              ping_interval=None) as narrow:  # fmt: skip
            assert narrow.session_id == session
            for rid, arguments in (("done", done_args), ("running", running_args)):
                res = await narrow.call("chat", arguments, request_id=rid, wait_s=30)
                received.append(res.model_dump_json())
                refused += res.error is not None and res.error.code == ErrorCode.FORBIDDEN
        await asyncio.gather(running, return_exceptions=True)  # its connection was taken over
        leaked = sum("emulated reply" in text for text in received)
        # The wider token still gets its own results: the finished call's from the replay
        # cache, the slow one's by attaching to it (or from the cache if it has finished).
        async with ExaiClient(daemon.url, _token(), session_id=session,
                              ping_interval=None) as again:  # fmt: skip
            mine = [await again.call("chat", a, request_id=r, wait_s=30)
                    for r, a in (("done", done_args), ("running", running_args))]  # fmt: skip
        figures.record(
            SECTION,
            narrow_token_retries=len(received),
            narrow_token_refused=refused,
            narrow_token_results_leaked=leaked,
            wide_token_results_after=sum(m.error is None for m in mine),
        )
        assert refused == 2 and leaked == 0
        assert all(m.error is None for m in mine), mine
        assert mine[0].metadata.replayed and mine[0].outputs == done.outputs
        assert "DAVE-SLOW-QUESTION" in mine[1].outputs[0].text
        assert len([r for r in emulator.requests if "DAVE" in json.dumps(r["body"])]) == 2
        _problems(daemon)
    finally:
        daemon.stop()


# --- the replay cache's memory ------------------------------------------------------------


async def _fill(url: str, results: int, size: int, tag: str) -> None:
    text = ("0123456789abcdef " * (size // 17 + 1))[:size]
    async with ExaiClient(url, TOKEN, ping_interval=None) as client:
        for i in range(results):
            res = await client.call("echo", {"text": f"{tag} {i} {text}"[:size]})
            assert res.error is None, res.error


async def test_the_replay_cache_is_bounded_and_given_back_when_sessions_end(
    tmp_path: Path, figures
) -> None:
    results, size, bound = scaled(1000, 50), 49 * 1024, 64 * MIB
    daemon = DaemonProcess(
        tmp_path,
        EXAI_WS_TOKEN=TOKEN,
        EXAI_RATE_LIMIT_PER_MIN="0",
        EXAI_MAX_RESULT_TOKENS="1000000",  # 49 KB results are kept whole, not spilled
        EXAI_REPLAY_WINDOW_S="60",  # sessions end (are swept) 60 s after their last use
        EXAI_REPLAY_MAX_BYTES=str(bound),
    ).start()
    try:
        rss_start = daemon.rss_bytes()
        await asyncio.gather(*(_fill(daemon.url, results, size, f"s{s}") for s in range(2)))
        peak = await daemon.ametrics()
        rss_full = daemon.rss_bytes()
        swept_s = await wait_until(
            lambda: daemon.metrics().get("exai_sessions") == 0, 120, "sessions swept"
        )
        after = await daemon.ametrics()
        rss_after = daemon.rss_bytes()
        await asyncio.gather(*(_fill(daemon.url, results, size, f"t{s}") for s in range(2)))
        rss_again = daemon.rss_bytes()
        figures.record(
            SECTION,
            memory_results_sent=f"2 sessions x {results} results of {size // 1024} KB",
            memory_replay_bound_mib=bound // MIB,
            memory_replay_held_mib=round(peak["exai_replay_bytes"] / MIB, 1),
            memory_replay_entries_held=int(peak["exai_replay_entries"]),
            memory_rss_start_mib=round(rss_start / MIB, 1),
            memory_rss_full_mib=round(rss_full / MIB, 1),
            memory_sessions_swept_after_s=round(swept_s, 1),
            memory_replay_held_after_mib=round(after["exai_replay_bytes"] / MIB, 1),
            memory_rss_after_mib=round(rss_after / MIB, 1),
            memory_rss_second_round_mib=round(rss_again / MIB, 1),
        )
        assert peak["exai_replay_bytes"] <= bound
        assert rss_full - rss_start <= bound + 48 * MIB
        assert after["exai_replay_bytes"] == after["exai_replay_entries"] == 0
        assert rss_after - rss_start <= 24 * MIB, "memory not given back after the sweep"
        assert rss_again - rss_start <= bound + 48 * MIB
        _problems(daemon)
    finally:
        daemon.stop()
