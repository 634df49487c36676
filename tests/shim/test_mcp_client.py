"""The official MCP client drives ``exai shim`` against a real daemon process."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from exai.store.sqlite import SqliteStore
from exai.tools.builtin import EchoInput
from tests.shim.helpers import DaemonProcess, mcp_session, shim_command, shim_env


async def test_lists_tools_with_their_schemas_and_calls_them(shared_daemon, tmp_path: Path):
    async with mcp_session(shim_env(shared_daemon), tmp_path) as mcp:
        listed = {t.name: t for t in (await mcp.list_tools()).tools}
        assert {"echo", "status", "version", "listmodels"} <= set(listed)
        schema = EchoInput.model_json_schema()
        schema.pop("title")
        for prop in schema["properties"].values():  # generated titles are dropped
            prop.pop("title")
        assert listed["echo"].input_schema == schema

        res = await mcp.call_tool("echo", {"text": "hello"})
        assert not res.is_error
        assert [c.text for c in res.content if isinstance(c, types.TextContent)] == ["hello"]
        assert res.structured_content["tool"] == "echo"
        assert res.structured_content["latency_ms"] >= 0


async def test_many_calls_share_one_websocket(shared_daemon, tmp_path: Path):
    opened = shared_daemon.gauge("exai_connections_opened_total")
    async with mcp_session(shim_env(shared_daemon), tmp_path) as mcp:
        start = time.monotonic()
        results = await asyncio.gather(
            *(mcp.call_tool("echo", {"text": str(i), "delay_s": 0.5}) for i in range(20))
        )
        elapsed = time.monotonic() - start
    assert [r.content[0].text for r in results] == [str(i) for i in range(20)]
    assert elapsed < 3.0, "calls ran one after another instead of concurrently"
    assert shared_daemon.gauge("exai_connections_opened_total") - opened == 1


async def test_progress_and_stream_chunks_reach_the_progress_callback(shared_daemon, tmp_path):
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with mcp_session(shim_env(shared_daemon), tmp_path) as mcp:
        res = await mcp.call_tool("echo", {"text": "abcdef", "stream_chunks": 3, "delay_s": 0.7},
                                  progress_callback=on_progress)  # fmt: skip
    assert res.content[0].text == "abcdef"
    values = [p for p, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values), "progress must increase"
    messages = [m for _, m in seen]
    assert any(m and "echo running" in m for m in messages), messages  # the daemon's heartbeat
    assert messages[-3:] == ["ab", "cd", "ef"]  # the stream, in order


async def test_without_a_progress_token_nothing_is_streamed(shared_daemon, tmp_path):
    async with mcp_session(shim_env(shared_daemon), tmp_path) as mcp:
        res = await mcp.call_tool("echo", {"text": "abcdef", "stream_chunks": 3})
    assert res.content[0].text == "abcdef" and not res.is_error


async def test_daemon_errors_arrive_as_is_error_with_code_and_message(shared_daemon, tmp_path):
    async with mcp_session(shim_env(shared_daemon), tmp_path) as mcp:
        missing = await mcp.call_tool("no_such_tool", {})
        invalid = await mcp.call_tool("echo", {"delay_s": "soon"})
        unsendable = await mcp.call_tool("x" * 200, {})
    assert unsendable.is_error and unsendable.content[0].text.startswith("INVALID_REQUEST: ")
    assert missing.is_error and missing.content[0].text.startswith("TOOL_NOT_FOUND: ")
    assert missing.structured_content["error"]["code"] == "TOOL_NOT_FOUND"
    assert invalid.is_error and "VALIDATION_ERROR" in invalid.content[0].text
    assert invalid.structured_content["error"]["details"]["fields"][0]["field"] == "delay_s"


async def test_mcp_cancellation_cancels_the_daemon_task(shared_daemon, tmp_path):
    before = shared_daemon.calls("echo", "CANCELLED")
    async with mcp_session(shim_env(shared_daemon), tmp_path) as mcp:
        call = asyncio.create_task(mcp.call_tool("echo", {"delay_s": 30}))
        await shared_daemon.wait_for(lambda d: d.gauge("exai_calls_in_flight") == 1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await shared_daemon.wait_for(lambda d: d.calls("echo", "CANCELLED") == before + 1)
        assert shared_daemon.gauge("exai_calls_in_flight") == 0
        # The session is still usable after a cancel.
        assert (await mcp.call_tool("echo", {"text": "after"})).content[0].text == "after"


async def test_daemon_restarted_mid_session_next_call_succeeds(daemon_process, tmp_path):
    daemon: DaemonProcess = daemon_process()
    async with mcp_session(shim_env(daemon), tmp_path) as mcp:
        assert (await mcp.call_tool("echo", {"text": "one"})).content[0].text == "one"
        daemon.stop()
        daemon.start()
        res = await mcp.call_tool("echo", {"text": "two"})
        assert not res.is_error and res.content[0].text == "two"


async def test_call_in_flight_across_a_restart_completes_once(daemon_process, tmp_path):
    """The daemon dies mid-call; the shim re-sends the call with the same request_id
    to the new daemon, which runs it once, and the MCP client gets one result."""
    daemon: DaemonProcess = daemon_process()
    async with mcp_session(shim_env(daemon), tmp_path) as mcp:
        call = asyncio.create_task(mcp.call_tool("echo", {"text": "survivor", "delay_s": 1.0}))
        await daemon.wait_for(lambda d: d.gauge("exai_calls_in_flight") == 1)
        daemon.kill()
        daemon.start()
        res = await asyncio.wait_for(call, 20)
        assert not res.is_error and res.content[0].text == "survivor"
        assert daemon.calls("echo", "ok") == 1
        assert (await mcp.call_tool("echo", {"text": "next"})).content[0].text == "next"
    assert daemon.calls("echo", "ok") == 2


async def test_tool_list_change_is_announced(daemon_process, tmp_path):
    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    daemon: DaemonProcess = daemon_process()
    async with mcp_session(shim_env(daemon), tmp_path, message_handler=on_message) as mcp:
        assert "echo" in {t.name for t in (await mcp.list_tools()).tools}
        daemon.stop()
        daemon.start(EXAI_ENABLE_ECHO="false")
        await asyncio.wait_for(changed.wait(), 15)
        assert "echo" not in {t.name for t in (await mcp.list_tools()).tools}


async def test_unreachable_daemon_is_a_clear_error(tmp_path):
    env = shim_env(None, EXAI_WS_PORT="9", EXAI_SHIM_CONNECT_WAIT_S="0.5",
                   EXAI_DATA_DIR=str(tmp_path / "data"))  # fmt: skip
    async with mcp_session(env, tmp_path) as mcp:
        res = await mcp.call_tool("echo", {"text": "x"})
        assert res.is_error and "not reachable" in res.content[0].text
        assert "exai serve" in res.content[0].text
        with pytest.raises(MCPError, match="not reachable"):
            await mcp.list_tools()


async def test_a_refused_token_fails_the_handshake_with_the_unauthorized_message(
    daemon_process, tmp_path
):
    """A client of the handshake era sees the refusal where it looks first: its
    ``initialize`` fails, so it shows the server as failed, not as connected."""
    daemon: DaemonProcess = daemon_process(EXAI_WS_TOKEN="right-token")
    env = shim_env(daemon, EXAI_WS_TOKEN="wrong-token", EXAI_SHIM_CONNECT_WAIT_S="2")
    with pytest.raises(BaseException) as raised:  # the SDK's task group wraps it
        async with mcp_session(env, tmp_path):
            pass
    [refused] = _leaves(raised.value)
    assert isinstance(refused, MCPError), refused
    message = refused.error.message
    assert message.startswith("UNAUTHORIZED: the exai daemon at ")
    assert "refused the token" in message and "EXAI_WS_TOKEN" in message


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


async def test_a_refused_token_fails_listing_and_every_call_of_a_2026_era_client(
    daemon_process, tmp_path
):
    """The 2026-07-28 protocol has no handshake to fail (a failed ``server/discover``
    sends a client back to ``initialize``, which the connection then refuses for
    its era, hiding why): listing fails with the message, and every call is an
    error result carrying it."""
    daemon: DaemonProcess = daemon_process(EXAI_WS_TOKEN="right-token")
    env = shim_env(daemon, EXAI_WS_TOKEN="wrong-token", EXAI_SHIM_CONNECT_WAIT_S="2")
    command, *args = shim_command()
    params = StdioServerParameters(command=command, args=args, env=env, cwd=tmp_path)
    async with Client(params, mode="auto") as client:
        assert client.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        with pytest.raises(MCPError, match="refused the token"):
            await client.list_tools()
        res = await client.call_tool("echo", {"text": "x"})
    assert res.is_error and res.structured_content["error"]["code"] == "UNAUTHORIZED"
    assert "refused the token" in res.content[0].text


async def test_url_and_token_arguments_override_settings(daemon_process, tmp_path):
    daemon: DaemonProcess = daemon_process(EXAI_WS_TOKEN="t0ken")
    env = shim_env(None, EXAI_WS_PORT="9", EXAI_DATA_DIR=str(tmp_path / "data"))
    async with mcp_session(env, tmp_path, args=["--url", daemon.url, "--token", "t0ken"]) as mcp:
        assert (await mcp.call_tool("echo", {"text": "ok"})).content[0].text == "ok"


async def test_a_2026_era_client_lists_calls_and_gets_progress(shared_daemon, tmp_path: Path):
    """The SDK's ``Client`` negotiates the per-request (2026-07-28) protocol when it can."""
    env = shim_env(shared_daemon)
    command, *args = shim_command()
    params = StdioServerParameters(command=command, args=args, env=env, cwd=tmp_path)
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with Client(params, mode="auto") as client:
        assert client.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        assert "echo" in {t.name for t in (await client.list_tools()).tools}
        res = await client.call_tool("echo", {"text": "abc", "stream_chunks": 3},
                                     progress_callback=on_progress)  # fmt: skip
    assert res.content[0].text == "abc" and seen[-3:] == ["a", "b", "c"]


async def test_a_chat_in_flight_across_a_restart_is_stored_once(
    daemon_process, provider_emulator, tmp_path
):
    """The shim re-sends the call in its own session with the same request_id; the
    conversation holds the turn once, whichever daemon answered it."""
    provider_emulator.reset()
    daemon: DaemonProcess = daemon_process(
        KIMI_API_KEY="sk-test-kimi", KIMI_BASE_URL=provider_emulator.base_url_kimi,
        EXAI_PROVIDER_MAX_RETRIES="0",
    )  # fmt: skip
    arguments = {
        "prompt": "slow question [emulate:latency_ms=1500]",
        "model": "kimi-k2.6",
    }
    async with mcp_session(shim_env(daemon), tmp_path) as mcp:
        call = asyncio.create_task(mcp.call_tool("chat", arguments))
        await daemon.wait_for(lambda d: d.gauge("exai_calls_in_flight") == 1)
        daemon.kill()
        daemon.start()
        res = await asyncio.wait_for(call, 30)
        assert not res.is_error, res.content
        cid = res.structured_content["continuation_id"]
        again = await mcp.call_tool("chat", {"prompt": "and then?", "continuation_id": cid,
                                             "model": "kimi-k2.6"})  # fmt: skip
        assert not again.is_error and "(saw 4 messages)" in again.content[0].text
    store = await SqliteStore.open(Path(daemon.env["EXAI_DATA_DIR"]) / "conversations.sqlite3")
    try:
        threads = await store.list_threads()
        assert [(t.id, t.turns) for t in threads] == [(cid, 2)]
    finally:
        await store.aclose()
