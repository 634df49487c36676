"""Done when: a job scheduled from an IDE through the ``schedule`` tool (the
official MCP SDK client over ``/mcp``) runs on time against the provider
emulator, its output lands in its thread, and the thread continues with ``chat``."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.jobs.helpers import FAST, finished_runs

TOKEN = "jobs-ide-token"


@asynccontextmanager
async def _sdk(url: str) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with (
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_scheduled_from_mcp_runs_on_time_and_the_thread_continues(
    tmp_path, provider_emulator
):
    provider_emulator.reset()
    settings = make_settings(tmp_path, ws_token=TOKEN, **FAST,
                             **emulated_providers(provider_emulator))  # fmt: skip
    async with running_daemon(settings) as daemon:
        url = f"http://127.0.0.1:{daemon.web.port}/mcp"
        at = datetime.fromtimestamp(int(time.time()) + 2, UTC).isoformat()
        async with _sdk(url) as mcp:
            assert {"schedule", "jobs", "unschedule"} <= {
                t.name for t in (await mcp.list_tools()).tools
            }
            made = await mcp.call_tool("schedule", {
                "tool": "chat", "when": at, "name": "nightly question",
                "arguments": {"prompt": "jobs-ide: summarise the proposal", "model": "kimi-k2.6"},
            })  # fmt: skip
            assert not made.is_error, made.content
            job = json.loads(made.content[0].text)
            assert job["schedule"]["kind"] == "once"
            store = daemon.services.jobs.store
            [run] = await finished_runs(store, job["id"])
            assert run.status == "succeeded", run.error
            due = datetime.fromisoformat(at).timestamp()
            assert run.scheduled_for == due and run.started_at >= due  # not early, not missed
            assert run.started_at - due < settings.jobs_misfire_grace_s
            thread_id = run.thread_id
            assert thread_id and (await store.get_job(job["id"], "default")).thread_id == thread_id
            turns = await daemon.services.store.messages(thread_id, "default")
            assert turns[0].content == "jobs-ide: summarise the proposal"
            assert turns[-1].role == "assistant" and turns[-1].content == run.output
            # The IDE continues the thread with chat; the model sees the scheduled turn.
            more = await mcp.call_tool("chat", {"prompt": "jobs-ide: and the risks?",
                                                "continuation_id": thread_id})  # fmt: skip
            assert not more.is_error, more.content
            assert more.structured_content["continuation_id"] == thread_id
        last = [r for r in provider_emulator.requests if "jobs-ide" in json.dumps(r["body"])][-1]
        sent = [m.get("content") for m in last["body"]["messages"]]
        assert "jobs-ide: summarise the proposal" in sent and run.output in sent
        assert sent[-1] == "jobs-ide: and the risks?"
