"""External MCP servers' tools, called through exai's protocol: over stdio and over
streamable HTTP, with failures that show and servers that come back."""

from __future__ import annotations

import asyncio
import json
import time

from exai.protocol import ErrorCode
from tests.bridge.conftest import HttpFixture, stdio_server_entry


async def _wait(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_stdio_tools_are_listed_with_remote_schemas_and_called(bridged, client_factory):
    async with bridged({"fixture": stdio_server_entry()}) as (daemon, _):
        client = await client_factory(daemon)
        tools = {t.name: t for t in await client.list_tools()}
        assert {"fixture__add", "fixture__shout", "fixture__odd_name", "echo"} <= set(tools)
        assert tools["fixture__add"].inputSchema["properties"].keys() == {"a", "b"}
        assert tools["fixture__add"].inputSchema["required"] == ["a", "b"]
        assert "from MCP server 'fixture'" in tools["fixture__add"].description

        res = await client.call("fixture__add", {"a": 2, "b": 3})
        assert res.error is None and res.outputs[0].text == "5"
        meta = res.metadata.model_dump()
        assert meta["untrusted"] is True and meta["source"] == "fixture"
        assert meta["remote_tool"] == "add" and meta["structured_content"] == {"result": 5}
        assert (await client.call("fixture__odd_name", {})).outputs[0].text == "odd"


async def test_remote_failures_are_provider_errors_naming_the_server(bridged, client_factory):
    async with bridged({"fixture": stdio_server_entry()}) as (daemon, _):
        client = await client_factory(daemon)
        failed = await client.call("fixture__fail", {"message": "nope"})
        assert failed.error.code == ErrorCode.PROVIDER_ERROR
        assert "'fixture'" in failed.error.message and "nope" in failed.error.message
        assert failed.error.details["untrusted"] is True
        # The arguments are validated by the remote server against its own schema.
        invalid = await client.call("fixture__add", {"a": "two"})
        assert (
            invalid.error.code == ErrorCode.PROVIDER_ERROR and "'fixture'" in invalid.error.message
        )


async def test_remote_progress_reaches_the_caller_and_timeouts_apply(bridged, client_factory):
    servers = {"fixture": stdio_server_entry(timeout_s=1.0)}
    async with bridged(servers) as (daemon, _):
        client = await client_factory(daemon)
        seen: list[str] = []
        res = await client.call("fixture__slow", {"seconds": 0.1},
                                on_progress=lambda p: seen.append(p.message))  # fmt: skip
        assert res.outputs[0].text == "slept 0.1" and seen == ["halfway", "done"]
        timed_out = await client.call("fixture__slow", {"seconds": 5})
        assert timed_out.error.code == ErrorCode.TIMEOUT
        assert "'fixture'" in timed_out.error.message


async def test_allow_and_deny_lists_pick_the_tools(bridged, client_factory):
    servers = {"fixture": stdio_server_entry(allow=["add", "sh*"], deny=["shout"])}
    async with bridged(servers) as (daemon, _):
        client = await client_factory(daemon)
        names = {t.name for t in await client.list_tools() if t.name.startswith("fixture__")}
        assert names == {"fixture__add"}


async def test_killed_stdio_server_errors_then_restarts_and_is_relisted(
    bridged, client_factory, tmp_path
):
    flag = tmp_path / "flag"
    servers = {"fixture": stdio_server_entry(env={"FIXTURE_FLAG_FILE": str(flag)})}
    async with bridged(servers) as (daemon, bridge):
        client = await client_factory(daemon)
        first_pid = (await client.call("fixture__pid", {})).outputs[0].text
        assert "fixture__bonus" not in {t.name for t in await client.list_tools()}
        flag.touch()  # the next start of the server offers one more tool

        crashed = await client.call("fixture__crash", {})
        assert crashed.error.code == ErrorCode.PROVIDER_ERROR
        assert "'fixture'" in crashed.error.message
        down = bridge.status()["servers"]["fixture"]
        assert down["failures"] >= 1 or down["state"] != "up"

        await _wait(lambda: bridge.links["fixture"].starts == 2)
        status = bridge.status()["servers"]["fixture"]
        assert status["state"] == "up" and status["failures"] == 1
        assert "fixture__bonus" in status["tools"]
        assert "fixture__bonus" in {t.name for t in await client.list_tools()}
        assert (await client.call("fixture__bonus", {})).outputs[0].text == "bonus"
        assert (await client.call("fixture__pid", {})).outputs[0].text != first_pid


async def test_http_server_killed_shows_the_error_then_reconnects(
    bridged, client_factory, http_fixture: HttpFixture
):
    async with bridged({"remote": {"url": http_fixture.url}}) as (daemon, bridge):
        client = await client_factory(daemon)
        assert (await client.call("remote__shout", {"text": "hi"})).outputs[0].text == "HI"

        http_fixture.kill()
        res = await client.call("remote__shout", {"text": "hi"})
        assert res.error.code == ErrorCode.PROVIDER_ERROR and res.error.retryable
        assert "MCP server 'remote'" in res.error.message
        await _wait(lambda: bridge.status()["servers"]["remote"]["failures"] >= 1)
        status = bridge.status()["servers"]["remote"]
        assert status["state"] != "up" and status["last_error"]
        # Still listed while down, so callers get this clear error, not TOOL_NOT_FOUND.
        assert "remote__shout" in {t.name for t in await client.list_tools()}

        http_fixture.start()
        await _wait(lambda: bridge.status()["servers"]["remote"]["state"] == "up")
        assert (await client.call("remote__shout", {"text": "back"})).outputs[0].text == "BACK"


async def test_a_server_that_cannot_start_shows_in_status(bridged, client_factory):
    servers = {"broken": {"command": "/nonexistent/exai-test-server"},
               "fixture": stdio_server_entry()}  # fmt: skip
    async with bridged(servers, wait=False) as (daemon, bridge):
        await _wait(lambda: bridge.links["fixture"].starts == 1)
        await _wait(lambda: bridge.links["broken"].failures >= 2)
        broken = bridge.status()["servers"]["broken"]
        assert broken["state"] in {"down", "starting"} and broken["tools"] == []
        assert broken["last_error"]
        client = await client_factory(daemon)
        assert (await client.call("fixture__add", {"a": 1, "b": 1})).outputs[0].text == "2"


async def test_closing_the_bridge_removes_its_tools(bridged, client_factory):
    async with bridged({"fixture": stdio_server_entry()}) as (daemon, bridge):
        await bridge.aclose()
        client = await client_factory(daemon)
        assert not any(t.name.startswith("fixture__") for t in await client.list_tools())
        assert bridge.status()["servers"]["fixture"]["state"] == "stopped"


async def test_a_stdio_server_gets_its_configured_env_and_none_of_the_daemons(
    bridged, client_factory, tmp_path, monkeypatch
):
    servers = {"fixture": stdio_server_entry(env={"SERVER_SETTING": "configured"})}
    secrets = {"KIMI_API_KEY": "sk-kimi-bridge-secret", "GLM_API_KEY": "glm-bridge-secret",
               "EXAI_WS_TOKEN": "ws-bridge-secret", "GITHUB_TOKEN": "ghp-bridge-secret",
               "DATABASE_URL": "postgresql://u:pw-bridge-secret@db/y"}  # fmt: skip
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    async with bridged(servers) as (daemon, _):
        client = await client_factory(daemon, secrets["EXAI_WS_TOKEN"])
        result = await client.call("fixture__environment", {})
    assert result.error is None, result.error
    seen = json.loads(result.outputs[0].text)
    assert seen["SERVER_SETTING"] == "configured"
    assert seen["HOME"] == str(tmp_path / "data" / "mcp-servers" / "home")
    # The minimal environment, the server's own setting, and what the MCP SDK adds.
    assert set(seen) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TMPDIR",
        "SERVER_SETTING",
        "LOGNAME",
        "SHELL",
        "TERM",
        "USER",
    }, set(seen)
    assert not [s for s in secrets.values() if s in result.outputs[0].text]
