"""Any daemon: behind HAProxy without stickiness, the model faces and the console work
on whichever daemon a request reaches.

Two daemons in this process share one real Postgres database; the real HAProxy
runs deploy/haproxy.cfg as shipped, its HTTP backend balancing round robin, so
consecutive requests alternate between them. Each daemon calls the provider
emulator with a Kimi key of its own, so the emulator's log tells which daemon
made each model call. The emulator refuses a thinking tool round without its
reasoning, as Moonshot does; exai refuses it first when the caller asked for
thinking, so a reasoning lost between daemons fails the loop.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from exai.app import App
from exai.emulators.haproxy import TempHaproxy
from exai.emulators.postgres import TempPostgres
from exai.emulators.provider import EmulatorServer
from tests.conftest import emulated_providers, make_settings, running_daemon

pytestmark = pytest.mark.timeout(90)

ALICE = "alice-token-0123456789"
TOKENS = f"alice={ALICE},bob=bob-token-0123456789"
THINKING = {"thinking": {"type": "enabled"}}
QUESTION = {"role": "user", "content": "what do the notes say?"}
READ = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip
ROUNDS = 3


def daemon_key(n: int) -> str:
    return f"sk-any-daemon-{n}"


def settings(tmp_path: Path, emulator: EmulatorServer, n: int, **extra: Any) -> Any:
    return make_settings(
        tmp_path / f"d{n}",
        **{**emulated_providers(emulator), "kimi_api_key": daemon_key(n), "ws_tokens": TOKENS,
           "memory_enabled": False, **extra},
    )  # fmt: skip


@dataclass
class Pair:
    daemons: list[App]
    lb: TempHaproxy

    def direct(self, n: int) -> str:
        web = self.daemons[n].web
        assert web is not None
        return f"http://127.0.0.1:{web.port}"


@asynccontextmanager
async def two_daemons(
    tmp_path: Path, emulator: EmulatorServer, postgres_server: TempPostgres
) -> AsyncIterator[Pair]:
    url = postgres_server.create_database(f"any_{uuid.uuid4().hex[:8]}")
    async with AsyncExitStack() as stack:
        daemons = [
            await stack.enter_async_context(
                running_daemon(settings(tmp_path, emulator, n, store_url=url))
            )
            for n in (1, 2)
        ]
        lb = TempHaproxy([d.port for d in daemons],
                         http_ports=[d.web.port for d in daemons if d.web])  # fmt: skip
        await asyncio.to_thread(lb.start)
        stack.callback(lb.stop)
        await _until_both_up(lb)
        yield Pair(daemons, lb)


async def _until_both_up(lb: TempHaproxy) -> None:
    """Until HAProxy's HTTP frontend answers. It counts a server up from its start (the
    daemons were up before it), so requests alternate from the first on."""
    async with httpx.AsyncClient(base_url=lb.http_url) as http:
        for _ in range(100):
            try:
                if (await http.get("/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError("HAProxy's HTTP frontend did not answer")


def returned(message: Any) -> dict[str, Any]:
    """The assistant round as an OpenAI client keeps it: no reasoning_content."""
    return {"role": "assistant", "content": message.content,
            "tool_calls": [c.model_dump() for c in message.tool_calls]}  # fmt: skip


def kimi_requests(emulator: EmulatorServer) -> list[dict[str, Any]]:
    return [r for r in emulator.requests if r.get("vendor") == "kimi"]


# --- the tool-round reasoning ------------------------------------------------------


async def test_a_thinking_kimi_tool_loop_keeps_its_reasoning_on_the_other_daemon(
    tmp_path: Path, emulator: EmulatorServer, postgres_server: TempPostgres
) -> None:
    emulator.script(
        *({"tool_calls": [{"name": "read_file", "arguments": {"path": f"notes{n}.txt"}}],
           "reasoning": f"round {n}: I should read notes{n}.txt",
           "when": {"offers_tool": "read_file"}} for n in range(ROUNDS)),
        {"text": "The notes say hello.", "when": {"last_role": "tool"}},
    )  # fmt: skip
    async with (
        two_daemons(tmp_path, emulator, postgres_server) as pair,
        AsyncOpenAI(base_url=pair.lb.http_url + "/v1", api_key=ALICE, max_retries=0) as client,
    ):
        messages: list[dict[str, Any]] = [QUESTION]
        for _ in range(ROUNDS + 1):
            completion = await client.chat.completions.create(
                model="kimi-k2.6", messages=messages, tools=[READ], extra_body=THINKING
            )
            choice = completion.choices[0]
            assert "turned off" not in completion.model_dump_json()
            if choice.finish_reason != "tool_calls":
                break
            (call,) = choice.message.tool_calls or []
            messages += [returned(choice.message),
                         {"role": "tool", "tool_call_id": call.id, "content": "hello"}]  # fmt: skip
        assert choice.message.content == "The notes say hello."
        loaded = [d.core.stats()["tool_reasoning"]["loaded"] for d in pair.daemons]
        await _the_loop_is_one_session_thread(pair)
        await _a_draining_daemon_gets_no_more_requests(pair)

    sent = kimi_requests(emulator)
    assert len(sent) == ROUNDS + 1
    keys = [r["headers"]["authorization"] for r in sent]
    assert keys[0::2] != keys[1::2] and len(set(keys[0::2])) == len(set(keys[1::2])) == 1, keys
    for n, request in enumerate(sent):
        body = request["body"]
        assert body.get("thinking", {"type": "enabled"}) == {"type": "enabled"}
        rounds = [m for m in body["messages"] if m["role"] == "assistant"]
        assert [m.get("reasoning_content") for m in rounds] == [
            f"round {k}: I should read notes{k}.txt" for k in range(n)
        ]
    # Each daemon read from the store the rounds the other had made since its last turn.
    assert all(count >= 1 for count in loaded), loaded


async def _the_loop_is_one_session_thread(pair: Pair) -> None:
    """Each daemon kept the turns it answered, in whichever order their keepers wrote:
    one thread, each round once, with its reasoning."""
    for daemon in pair.daemons:
        await daemon.services.sessions.settled()
    (thread,) = await pair.daemons[0].services.store.list_threads("alice")
    messages = await pair.daemons[1].services.store.messages(thread.id, "alice")
    assert thread.face == "openai"
    assert [m.role for m in messages] == ["user", *["assistant", "tool"] * ROUNDS, "assistant"]
    assert [m.reasoning for m in messages if m.tool_calls] == [
        f"round {k}: I should read notes{k}.txt" for k in range(ROUNDS)]  # fmt: skip
    kept = [d.core.stats()["agent_sessions"]["kept"] for d in pair.daemons]
    assert kept == [(ROUNDS + 2) // 2, (ROUNDS + 1) // 2], kept  # round robin
    # Every call's cost is the thread's, though a keeper that came second found its
    # answer already written by the other daemon's (and wrote it no second time).
    for daemon in pair.daemons:
        await daemon.services.ledger.flush()
    costs = await pair.daemons[0].services.store.turn_costs(thread.id, "alice")
    assert len(costs) == thread.turns and thread.turns <= ROUNDS + 1


async def _a_draining_daemon_gets_no_more_requests(pair: Pair) -> None:
    """Its HTTP /health answers 503 while running calls finish; HAProxy's checks then
    send every request to the other daemon."""
    draining = pair.daemons[0]
    await draining.core.drain(grace_s=0.0)  # nothing runs: it only starts refusing
    async with httpx.AsyncClient(base_url=pair.lb.http_url) as http:
        assert (await http.get(pair.direct(0) + "/health")).status_code == 503
        answered: list[int] = []
        for _ in range(60):
            answered = [(await http.get("/health")).status_code for _ in range(4)]
            if answered == [200] * 4:
                break
            await asyncio.sleep(0.05)
        assert answered == [200] * 4


async def test_a_restarted_daemon_on_sqlite_keeps_the_reasoning(
    tmp_path: Path, emulator: EmulatorServer
) -> None:
    emulator.script({"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}],
                     "reasoning": "I should read a.txt"})  # fmt: skip
    one = settings(tmp_path, emulator, 1)
    async with running_daemon(one) as daemon:
        web = daemon.web
        assert web is not None
        async with AsyncOpenAI(base_url=f"http://127.0.0.1:{web.port}/v1", api_key=ALICE,
                               max_retries=0) as client:  # fmt: skip
            first = await client.chat.completions.create(
                model="kimi-k2.6", messages=[QUESTION], tools=[READ], extra_body=THINKING
            )
    message = first.choices[0].message
    (call,) = message.tool_calls or []
    history = [QUESTION, returned(message), {"role": "tool", "tool_call_id": call.id,
                                             "content": "hello"}]  # fmt: skip

    async with running_daemon(one) as daemon:
        web = daemon.web
        assert web is not None
        async with AsyncOpenAI(base_url=f"http://127.0.0.1:{web.port}/v1", api_key=ALICE,
                               max_retries=0) as client:  # fmt: skip
            second = await client.chat.completions.create(
                model="kimi-k2.6", messages=history, tools=[READ], extra_body=THINKING
            )
    assert second.choices[0].finish_reason == "stop"
    assert kimi_requests(emulator)[-1]["body"]["messages"][1]["reasoning_content"] == (
        "I should read a.txt"
    )


# --- the console ---------------------------------------------------------------------


async def sign_in(http: httpx.AsyncClient, token: str) -> None:
    form = await http.get("/console/login")
    match = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert match is not None, form.text
    done = await http.post("/console/login", data={"login_token": match.group(1), "token": token,
                                                   "next": "/console/threads"})  # fmt: skip
    assert done.status_code == 303 and done.headers["location"] == "/console/threads", done.text


def csrf_of(page: httpx.Response) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None, page.text
    return match.group(1)


async def test_a_console_sign_in_on_one_daemon_is_honoured_by_the_other_until_signed_out(
    tmp_path: Path, emulator: EmulatorServer, postgres_server: TempPostgres
) -> None:
    async with (
        two_daemons(tmp_path, emulator, postgres_server) as pair,
        httpx.AsyncClient(base_url=pair.lb.http_url) as lb,
        httpx.AsyncClient(base_url=pair.direct(0)) as one,
        httpx.AsyncClient(base_url=pair.direct(1)) as two,
    ):
        await _an_mcp_session_stays_with_its_daemon(lb)
        # Round robin: the form, the sign-in and each page after it alternate daemons.
        await sign_in(lb, ALICE)
        for _ in range(4):
            page = await lb.get("/console/threads")
            assert page.status_code == 200 and "alice" in page.text
        for direct in (one, two):
            direct.cookies = lb.cookies
            assert (await direct.get("/console/session")).json() == {"principal": "alice"}

        # A message shown once, set on one daemon, is shown by the other.
        said = await one.post("/console/threads", data={
            "prompt": "hello", "model": "kimi-k2.6",
            "csrf": csrf_of(await one.get("/console/threads"))})  # fmt: skip
        assert said.status_code == 303, said.text
        thread = said.headers["location"]
        forked = await one.post(thread + "/fork", data={"csrf": csrf_of(await one.get(thread))})
        assert forked.status_code == 303, forked.text
        copy = forked.headers["location"]
        assert "Forked: this is the copy" in (await two.get(copy)).text
        assert "Forked: this is the copy" not in (await one.get(copy)).text  # shown once

        # Signed out on one daemon: the other signs no one in with the cookie either.
        out = await two.post("/console/logout", data={"csrf": csrf_of(await two.get(copy))})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        for client in (one, lb, lb):
            client.cookies = lb.cookies
            after = await client.get("/console/threads")
            assert after.status_code == 303
            assert after.headers["location"].startswith("/console/login")


MCP = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
       "Authorization": f"Bearer {ALICE}"}  # fmt: skip


async def _an_mcp_session_stays_with_its_daemon(lb: httpx.AsyncClient) -> None:
    """A 2025-11-25 MCP session lives in the daemon that opened it: HAProxy sends every
    request naming it there (without the stick table, every other one gets 404)."""
    opened = await lb.post("/mcp", headers=MCP, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}})  # fmt: skip
    assert opened.status_code == 200, opened.text
    session = {**MCP, "Mcp-Session-Id": opened.headers["mcp-session-id"],
               "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await lb.post("/mcp", headers=session, json=initialized)
    assert done.status_code == 202, done.text
    for n in range(4):
        asked = {"jsonrpc": "2.0", "id": n + 1, "method": "tools/list"}
        listed = await lb.post("/mcp", headers=session, json=asked)
        assert listed.status_code == 200 and '"tools"' in listed.text, listed.text
