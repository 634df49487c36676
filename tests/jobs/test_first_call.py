"""``schedule`` as the very first call of a freshly started ``exai serve``.

The daemon builds its job service before any face listens, so the first call
that can reach it finds the service there. Each start here is a real process;
the client knocks on the WebSocket port every few milliseconds from the moment
the process is spawned and sends ``schedule`` the instant a hello succeeds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from exai.auth import Principal
from exai.client import ClientError, ExaiClient
from exai.errors import ExaiError
from exai.tools.base import Services, ToolContext
from exai.tools.jobs import ScheduleInput, ScheduleTool
from tests.conftest import make_settings, running_daemon
from tests.reliability.harness import free_port

TOKEN = "first-call-token-0123456789"
pytestmark = pytest.mark.timeout(300)


def spawn_daemon(workdir: Path, **extra: str) -> tuple[subprocess.Popen[bytes], int, Any]:
    """``exai serve`` on a free port, its output to ``daemon.log``; not waited for."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXAI_", "KIMI_", "GLM_"))}
    env |= {"EXAI_WS_HOST": "127.0.0.1", "EXAI_WS_PORT": str(port), "EXAI_HTTP_PORT": "0",
            "EXAI_DATA_DIR": str(workdir / "data"), "EXAI_WS_TOKEN": TOKEN,
            "EXAI_AUDIT_ENABLED": "false", "EXAI_TOOL_PROFILE": "full",
            "EXAI_LOG_FORMAT": "json", **extra}  # fmt: skip
    log = open(workdir / "daemon.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "exai.cli.main", "serve"], env=env,
                               cwd=workdir, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    return process, port, log


async def first_schedule_call(workdir: Path) -> tuple[dict[str, Any], int]:
    """Start ``exai serve``, send ``schedule`` as its first call; the answer and how
    many connection attempts failed before the daemon listened."""
    process, port, log = spawn_daemon(workdir)
    knocks = 0
    try:
        while True:
            assert process.poll() is None, (workdir / "daemon.log").read_text()[-2000:]
            client = ExaiClient(f"ws://127.0.0.1:{port}", TOKEN, connect_attempts=1)
            try:
                await client.connect()
            except (ClientError, OSError):
                knocks += 1
                await asyncio.sleep(0.005)
                continue
            try:
                res = await client.call("schedule", {"tool": "echo", "when": "every 3600",
                                                     "arguments": {"text": "first"}})  # fmt: skip
            finally:
                await client.close()
            answer = {"error": None if res.error is None else res.error.model_dump(mode="json"),
                      "text": res.outputs[0].text if res.outputs else ""}  # fmt: skip
            return answer, knocks
    finally:
        process.terminate()
        process.wait(30)
        log.close()


async def test_schedule_as_the_first_call_of_a_fresh_daemon_finds_the_job_service(tmp_path):
    answers = [await first_schedule_call(tmp_path / f"start-{n}") for n in range(3)]
    for answer, _ in answers:
        assert answer["error"] is None, answer
        assert json.loads(answer["text"])["created"] is True
    assert sum(knocks for _, knocks in answers) > 0  # the client was there before the daemon


async def test_with_jobs_off_schedule_says_so_by_name(tmp_path, client_factory):
    async with running_daemon(make_settings(tmp_path, jobs_enabled=False,
                                            tool_profile="full")) as daemon:  # fmt: skip
        client = await client_factory(daemon)
        res = await client.call("schedule", {"tool": "echo", "when": "every 3600"})
    assert res.error is not None and res.error.code.value == "TOOL_NOT_FOUND"
    assert "EXAI_JOBS_ENABLED" in res.error.message


async def test_a_job_tool_called_before_the_job_service_is_up_is_told_to_retry(tmp_path):
    """The gap the composition root closes (the service is built before any face
    listens), answered as a retryable UNAVAILABLE should a call ever fall into it."""
    settings = make_settings(tmp_path, tool_profile="full")
    context = ToolContext(request_id="1", session_id="s", principal=Principal("alice"),
                          tool="schedule", deadline=time.monotonic() + 10,
                          services=Services(settings=settings), log=None)  # fmt: skip
    with pytest.raises(ExaiError) as refused:
        await ScheduleTool().run(ScheduleInput(tool="echo", when="every 3600"), context)
    info = refused.value.info()
    assert info.code.value == "UNAVAILABLE" and info.retryable
    assert info.retry_after_s is not None and 0 < info.retry_after_s <= 5
