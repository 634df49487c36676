"""Real agents meet exai's final errors: each shows exai's message and stops, without retrying.

Claude Code on ``/v1/messages``, Codex on ``/v1/responses``, qwen-code and
opencode on ``/v1/chat/completions``, each configured as docs/agents.md says,
against a daemon whose principal's budget is spent, and against one whose
provider fails every request. Each agent exits (within the test's timeout)
showing exai's message, and sends nothing again after exai's final answer: no
request body twice, and the provider sees at most exai's own attempts for each
request the agent sent (docs/agents.md#when-things-go-wrong).

A recording pass-through between the agent and the daemon counts what the
agent sent (:class:`~tests.clients.recorder.RecordingProxy`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exai.emulators.provider import EmulatorServer
from exai.store.costs import CostRow
from exai.store.sqlite import SqliteStore
from tests.clients.daemon import daemon_env
from tests.clients.model_agents import (
    AgentRun,
    claude_env,
    codex_env,
    run_claude,
    run_codex,
    run_opencode,
    run_qwen,
)
from tests.clients.recorder import RecordingProxy
from tests.shim.helpers import DaemonProcess

pytestmark = pytest.mark.timeout(300)

FACE = {
    "claude-code": "/v1/messages",
    "codex": "/v1/responses",
    "qwen-code": "/v1/chat/completions",
    "opencode": "/v1/chat/completions",
}
# What each agent sends for one headless prompt: opencode asks for a title as well.
MOST_REQUESTS = {"claude-code": 1, "codex": 1, "qwen-code": 1, "opencode": 2}
RETRIES = 1  # EXAI_PROVIDER_MAX_RETRIES of the daemon whose provider fails
PROMPT = "say hello"
# Bounds a hang, not a speed: each agent stops in seconds once it does not retry.
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorServer]:
    server = EmulatorServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def spent_daemon(
    tmp_path_factory: pytest.TempPathFactory, emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    """The docs' token's principal has spent its 1 USD of the month (a cost row
    another daemon recorded)."""
    workdir = tmp_path_factory.mktemp("spent-daemon")
    asyncio.run(_record_spend(workdir / "data" / "conversations.sqlite3", "default"))
    daemon = DaemonProcess(workdir, **daemon_env(emulator), EXAI_BUDGETS="default=1 USD/month")
    daemon.start(timeout_s=60)  # several agents' daemons may start at once
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def failing_daemon(
    tmp_path_factory: pytest.TempPathFactory, emulator: EmulatorServer
) -> Iterator[DaemonProcess]:
    env = {**daemon_env(emulator), "EXAI_PROVIDER_MAX_RETRIES": str(RETRIES)}
    daemon = DaemonProcess(tmp_path_factory.mktemp("failing-daemon"), **env)
    daemon.start(timeout_s=60)
    yield daemon
    daemon.stop()


async def _record_spend(path: Path, principal: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    store = await SqliteStore.open(path)
    try:
        await store.record_costs([CostRow(time.time() - 1, "another-daemon", principal, "chat",
                                          "s", "r", None, "kimi-k2.6", "kimi", 1, 0, 1, 0,
                                          "USD", 0, 0, 0, 10**9)])  # fmt: skip
    finally:
        await store.aclose()


def _run(agent: str, tmp_path: Path, base_url: str, **env: str) -> AgentRun:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    if agent == "claude-code":
        return run_claude(project, claude_env(home, base_url, **env), PROMPT,
                          timeout_s=RUN_TIMEOUT_S)  # fmt: skip
    if agent == "codex":
        return run_codex(project, codex_env(home, base_url), PROMPT, timeout_s=RUN_TIMEOUT_S)
    if agent == "qwen-code":
        return run_qwen(project, home, base_url, PROMPT, timeout_s=RUN_TIMEOUT_S)
    return run_opencode(project, home, base_url, PROMPT, timeout_s=RUN_TIMEOUT_S)


def _sent(proxy: RecordingProxy, agent: str) -> list[dict[str, Any]]:
    """What the agent sent to its face, having checked it sent nothing twice."""
    sent = [e["request"] for e in proxy.exchanges if e["path"] == FACE[agent]]
    bodies = [json.dumps(body, sort_keys=True) for body in sent]
    assert sent and len(set(bodies)) == len(bodies), f"{agent} sent a request again"
    assert len(sent) <= MOST_REQUESTS[agent], [e["path"] for e in proxy.exchanges]
    return sent


@pytest.fixture
def recorder() -> Iterator[list[RecordingProxy]]:
    proxies: list[RecordingProxy] = []
    yield proxies
    for proxy in proxies:
        proxy.stop()


def _proxy(daemon: DaemonProcess, proxies: list[RecordingProxy]) -> RecordingProxy:
    proxy = RecordingProxy(f"http://127.0.0.1:{daemon.http_port}")
    proxy.start()
    proxies.append(proxy)
    return proxy


@pytest.mark.parametrize("agent", list(FACE))
def test_a_spent_budget_is_shown_at_once_and_not_retried(
    agent: str, tmp_path: Path, spent_daemon: DaemonProcess, emulator: EmulatorServer,
    recorder: list[RecordingProxy],
) -> None:  # fmt: skip
    emulator.reset()
    proxy = _proxy(spent_daemon, recorder)
    run = _run(agent, tmp_path, proxy.base_url)
    assert run.returncode != 0, run.shown[-3000:]
    assert "has spent 1 USD of its budget of 1 USD per UTC month" in run.shown, run.shown[-3000:]
    _sent(proxy, agent)
    assert emulator.requests == []


@pytest.mark.parametrize("agent", list(FACE))
def test_a_provider_failure_exai_retried_is_shown_and_not_retried(
    agent: str, tmp_path: Path, failing_daemon: DaemonProcess, emulator: EmulatorServer,
    recorder: list[RecordingProxy],
) -> None:  # fmt: skip
    emulator.reset()
    emulator.script(*[{"status": 500}] * 200)
    proxy = _proxy(failing_daemon, recorder)
    run = _run(agent, tmp_path, proxy.base_url)
    assert run.returncode != 0, run.shown[-3000:]
    assert f"failed on all {RETRIES + 1} attempts exai made" in run.shown, run.shown[-3000:]
    sent = _sent(proxy, agent)
    assert 0 < len(emulator.requests) <= (RETRIES + 1) * len(sent)


def test_claude_code_shows_a_refused_token_after_one_request(
    tmp_path: Path, failing_daemon: DaemonProcess, recorder: list[RecordingProxy]
) -> None:
    proxy = _proxy(failing_daemon, recorder)
    run = _run("claude-code", tmp_path, proxy.base_url, ANTHROPIC_API_KEY="not-the-token")
    result = json.loads(run.stdout)
    assert result["is_error"] and result["api_error_status"] == 401, run.shown[-3000:]
    assert result["result"] == "Failed to authenticate. API Error: 401 invalid token"
    assert [e["status"] for e in proxy.exchanges] == [401]
