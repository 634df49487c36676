"""Agent sessions become threads: the real ``openai`` and ``anthropic`` SDKs drive the
model faces of a real daemon (SQLite, the provider emulator) as agents do, sending
their whole history each time, and the conversation store holds each session as one
thread with its tool calls and results (docs/agents.md#sessions)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import anthropic
import httpx
from openai import AsyncOpenAI

from exai.app import App
from exai.auth import Principal, issue_token
from exai.settings import load_settings
from exai.store.base import Thread
from exai.web.model_call import sessions_on
from tests.web.faces import READ, TOKENS, agent_turn, base_url, faces_daemon

QUESTION = {"role": "user", "content": "what does notes.txt say?"}
STEP = {
    "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
    "when": {"offers_tool": "read_file", "last_role": "user"},
}
ANSWER = {"text": "It says: {last_tool_result}", "when": {"last_role": "tool"}}
PLAIN = {"text": "noted", "when": {"last_role": "user"}}


def _client(daemon: App, principal: str = "alice", **headers: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url(daemon), api_key=TOKENS[principal], max_retries=0,
                       default_headers=headers or None)  # fmt: skip


async def _threads(daemon: App, owner: str = "alice") -> list[Thread]:
    await daemon.services.sessions.settled()
    return await daemon.services.store.list_threads(owner)


async def _transcript(daemon: App, thread: Thread) -> list[tuple[str, str | None]]:
    messages = await daemon.services.store.messages(thread.id, thread.owner)
    return [(m.role, m.content if m.role != "assistant" or m.content else
             json.dumps([c["function"]["name"] for c in m.tool_calls or []]))
            for m in messages]  # fmt: skip


async def _loop(client: AsyncOpenAI, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return await agent_turn(client, messages, "pelican", [READ])


async def test_an_agent_loop_on_chat_completions_is_one_thread_with_its_tool_rounds(
    tmp_path, emulator
):
    emulator.script(STEP, ANSWER, *[PLAIN] * 6)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        messages = [{"role": "system", "content": "You are an agent."}, QUESTION]
        messages = await _loop(client, messages)
        messages = await _loop(client, [*messages, {"role": "user", "content": "thanks"}])
        (thread,) = await _threads(daemon)
        assert daemon.core.stats()["agent_sessions"] == {
            "kept": 3, "failed": 0, "dropped": 0, "queued": 0}  # fmt: skip
        assert "exai_agent_session_turns_kept 3.0" in daemon.core.metrics.render().decode()
        assert await _transcript(daemon, thread) == [
            ("system", "You are an agent."),
            ("user", "what does notes.txt say?"),
            ("assistant", '["read_file"]'),
            ("tool", "pelican"),
            ("assistant", "It says: pelican"),
            ("user", "thanks"),
            ("assistant", "noted"),
        ]
        assert thread.turns == 3 and thread.face == "openai"
        assert thread.client is not None and thread.client.startswith("OpenAI SDK")
        assert thread.title == "what does notes.txt say?"
        await daemon.services.ledger.flush()
        costs = await daemon.services.store.turn_costs(thread.id, "alice")
        assert sorted(costs) == [1, 4, 6]  # each turn's own call, found by its request key
        assert await _threads(daemon, "bob") == []
        # The turns were kept by the daemon's session writer, a process of its own.
        writer = daemon.services.sessions._store
        cmdline = await asyncio.to_thread(Path(f"/proc/{writer.pid}/cmdline").read_bytes)
        assert b"exai.store.session_writer" in cmdline and writer.pid != os.getpid()


async def test_a_retried_request_is_one_turn_and_the_session_goes_on(tmp_path, emulator):
    emulator.script(*[PLAIN] * 6)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        first = [QUESTION]
        for _ in range(2):  # the same request twice: the first answer was lost
            reply = await client.chat.completions.create(model="kimi-k2.6", messages=first)
        answered = [*first, reply.choices[0].message.model_dump(exclude_none=True)]
        await client.chat.completions.create(
            model="kimi-k2.6", messages=[*answered, {"role": "user", "content": "more"}]
        )
        (thread,) = await _threads(daemon)
        assert [role for role, _ in await _transcript(daemon, thread)] == [
            "user", "assistant", "user", "assistant"]  # fmt: skip


async def test_two_requests_extending_one_prefix_branch_into_a_fork(tmp_path, emulator):
    emulator.script(*[PLAIN] * 6)
    async with faces_daemon(tmp_path, emulator) as daemon, _client(daemon) as client:
        reply = await client.chat.completions.create(model="kimi-k2.6", messages=[QUESTION])
        answered = [QUESTION, reply.choices[0].message.model_dump(exclude_none=True)]
        for follow_up in ("left", "right"):
            await client.chat.completions.create(
                model="kimi-k2.6", messages=[*answered, {"role": "user", "content": follow_up}]
            )
        threads = await _threads(daemon)
        assert len(threads) == 2
        (main,) = [t for t in threads if t.parent_id is None]
        (branch,) = [t for t in threads if t.parent_id == main.id]
        assert [c for _, c in await _transcript(daemon, main)][2] == "left"
        assert [c for _, c in await _transcript(daemon, branch)] == [
            "what does notes.txt say?", "noted", "right", "noted"]  # fmt: skip
        assert branch.fork_point == 2 and branch.face == "openai"


async def test_identical_histories_of_two_principals_stay_two_threads(tmp_path, emulator):
    emulator.script(*[PLAIN] * 6)
    async with faces_daemon(tmp_path, emulator) as daemon:
        for name in ("alice", "bob"):
            async with _client(daemon, name) as client:
                reply = await client.chat.completions.create(model="kimi-k2.6",
                                                             messages=[QUESTION])  # fmt: skip
                answered = [QUESTION, reply.choices[0].message.model_dump(exclude_none=True)]
        # bob's second request carries the history alice's thread holds: it is bob's
        async with _client(daemon, "bob") as client:
            await client.chat.completions.create(
                model="kimi-k2.6", messages=[*answered, {"role": "user", "content": "again"}]
            )
        (alice,) = await _threads(daemon, "alice")
        (bob,) = await _threads(daemon, "bob")
        assert alice.turns == 1 and bob.turns == 2 and alice.id != bob.id


async def test_a_session_is_not_kept_when_the_request_or_the_settings_say_so(tmp_path, emulator):
    emulator.script(*[PLAIN] * 6)
    async with faces_daemon(tmp_path, emulator, faces_sessions=["bob"]) as daemon:
        async with _client(daemon, "alice") as client:  # not listed
            await client.chat.completions.create(model="kimi-k2.6", messages=[QUESTION])
        async with _client(daemon, "bob", **{"X-Exai-Session": "off"}) as client:
            await client.chat.completions.create(model="kimi-k2.6", messages=[QUESTION])
        assert await _threads(daemon, "alice") == []
        assert await _threads(daemon, "bob") == []
        async with _client(daemon, "bob") as client:
            await client.chat.completions.create(model="kimi-k2.6", messages=[QUESTION])
        assert len(await _threads(daemon, "bob")) == 1


async def test_claude_code_s_session_id_groups_a_rewritten_history_as_its_lineage(
    tmp_path, emulator
):
    emulator.script(*[PLAIN] * 6)
    user_id = json.dumps({"device_id": "d", "account_uuid": "", "session_id": "sess-1234abcd"})
    async with faces_daemon(tmp_path, emulator) as daemon:
        client = anthropic.AsyncAnthropic(base_url=base_url(daemon, ""), api_key=TOKENS["alice"],
                                          max_retries=0)  # fmt: skip
        ask = {"model": "kimi-k2.6", "max_tokens": 100, "metadata": {"user_id": user_id}}
        first = [{"role": "user", "content": "hello there"}]
        reply = await client.messages.create(messages=first, **ask)
        answered = [*first, {"role": "assistant", "content": reply.content}]
        await client.messages.create(messages=[*answered, {"role": "user", "content": "go on"}],
                                     **ask)  # fmt: skip
        # the client compacted its history: a summary in place of the turns
        await client.messages.create(
            messages=[{"role": "user", "content": "Summary: we said hello. Go on."}], **ask
        )
        await client.close()
        newest, oldest = await _threads(daemon)
        assert oldest.turns == 2 and oldest.session_ref == "sess-1234abcd"
        assert newest.follows == oldest.id and newest.session_ref == "sess-1234abcd"
        assert newest.face == "anthropic" and newest.client.startswith("Anthropic SDK")


async def test_a_responses_chain_is_one_thread(tmp_path, emulator):
    emulator.script(*[PLAIN] * 6)
    async with faces_daemon(tmp_path, emulator) as daemon:
        headers = {"authorization": f"Bearer {TOKENS['alice']}"}
        async with httpx.AsyncClient(base_url=base_url(daemon), headers=headers) as http:
            first = (
                await http.post(
                    "/responses",
                    json={"model": "kimi-k2.6", "input": "hello", "instructions": "Be brief."},
                )
            ).json()
            second = await http.post("/responses", json={
                "model": "kimi-k2.6", "input": "and again",
                "previous_response_id": first["id"]})  # fmt: skip
            assert second.status_code == 200, second.text
        (thread,) = await _threads(daemon)
        assert await _transcript(daemon, thread) == [
            ("system", "Be brief."), ("user", "hello"), ("assistant", "noted"),
            ("user", "and again"), ("assistant", "noted"),
        ]  # fmt: skip
        assert thread.face == "responses"


async def test_with_memory_extraction_on_an_agent_session_teaches_memory(tmp_path, emulator):
    learned = {"memories": [{"content": "The project's store is SQLite", "type": "decision"}]}
    emulator.script({"text": json.dumps(learned)}, vendor="glm")
    emulator.script(PLAIN, vendor="kimi")
    overrides = {"memory_extraction_enabled": True, "memory_extraction_model": "glm-4.5-flash"}
    async with faces_daemon(tmp_path, emulator, **overrides) as daemon:
        async with _client(daemon) as client:
            ask = "<environment_context>cwd</environment_context>"
            await client.chat.completions.create(model="kimi-k2.6", messages=[
                {"role": "user", "content": ask},
                {"role": "user", "content": "we keep the store in SQLite"}])  # fmt: skip
        (thread,) = await _threads(daemon)
        found: list[Any] = []
        for _ in range(200):  # waits for the extraction worker; never a timing assertion
            found = await daemon.services.memory.recall("alice", "store sqlite", vectors=False)
            if found:
                break
            await asyncio.sleep(0.05)
        assert [r.memory.content for r in found] == ["The project's store is SQLite"]
        (extract,) = [r["body"] for r in emulator.requests if r["vendor"] == "glm"]
        assert "we keep the store in SQLite" in json.dumps(extract["messages"])
        assert "environment_context" not in json.dumps(extract["messages"])
        assert thread.turns == 1


async def test_a_token_s_exai_sessions_claim_wins_over_the_setting(tmp_path, emulator):
    emulator.script(*[PLAIN] * 4)
    secret = "faces-secret-0123456789abcdef0123456789"
    async with faces_daemon(tmp_path, emulator, jwt_secret=secret) as daemon:
        for name, keep in (("carol", False), ("dave", True), ("erin", None)):
            token = issue_token(secret, name, sessions=keep)
            async with AsyncOpenAI(base_url=base_url(daemon), api_key=token) as client:
                await client.chat.completions.create(model="kimi-k2.6", messages=[QUESTION])
        kept = {name: len(await _threads(daemon, name)) for name in ("carol", "dave", "erin")}
        assert kept == {"carol": 0, "dave": 1, "erin": 1}  # erin: EXAI_FACES_SESSIONS=*


def test_none_keeps_no_one_s_sessions_and_an_empty_variable_is_the_default(monkeypatch):
    alice = Principal("alice")
    for value, kept in (("none", False), ("", True), ("bob", False), ("alice,bob", True)):
        monkeypatch.setenv("EXAI_FACES_SESSIONS", value)
        assert sessions_on(alice, load_settings(_env_file=None).faces_sessions) is kept, value
    assert sessions_on(Principal("alice", sessions=True), ["none"])
