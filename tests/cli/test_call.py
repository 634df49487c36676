"""``exai call`` and ``exai tools`` as a user runs them: the real console script against a
real daemon (in this process, on real sockets) and the provider emulator."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import pytest

from exai.store import ANY_OWNER
from tests.cli.helpers import EXAI, clean_env, finish, free_port, run_exai, spawn_exai
from tests.conftest import emulated_providers


def _env(tmp_path: Path, daemon, **env: str) -> dict[str, str]:
    return clean_env(tmp_path, EXAI_WS_PORT=str(daemon.port),
                     EXAI_HTTP_PORT=str(daemon.web.port if daemon.web else ""), **env)  # fmt: skip


def _continuation(err: str) -> str:
    found = re.search(r"^continuation_id: (\S+)$", err, re.MULTILINE)
    assert found, err
    return found.group(1)


async def test_call_prints_the_continuation_id_and_how_to_continue(
    tmp_path, daemon_factory, provider_emulator
):
    daemon = await daemon_factory(**emulated_providers(provider_emulator))
    env = _env(tmp_path, daemon)
    first = await run_exai("call", "chat", "prompt=Explain WAL mode", env=env)
    thread = _continuation(first.err)
    assert first.code == 0 and "Explain WAL mode" in first.out
    assert thread not in first.out  # stdout keeps only the answer
    assert f"exai call chat continuation_id={thread} prompt=" in first.err
    second = await run_exai("call", "chat", "prompt=and its downsides?",
                            f"continuation_id={thread}", env=env)  # fmt: skip
    # The emulator says how many messages it was sent: system, turn 1 (two), the new one.
    assert second.code == 0 and "(saw 4 messages)" in second.out
    assert _continuation(second.err) == thread


async def test_stream_of_a_tool_that_does_not_stream_prints_the_result(tmp_path, daemon_factory):
    daemon = await daemon_factory()
    env = _env(tmp_path, daemon)
    plain = await run_exai("call", "echo", "text=no chunks here", "--stream", env=env)
    chunked = await run_exai("call", "echo", "text=abcdef", "stream_chunks=3", "--stream", env=env)
    assert plain.code == 0 and plain.out == "no chunks here\n"
    assert chunked.code == 0 and chunked.out == "abcdef\n"


async def test_values_are_read_as_the_schema_wants(tmp_path, daemon_factory):
    daemon = await daemon_factory()
    env = _env(tmp_path, daemon)
    number = await run_exai("call", "echo", "text=42", env=env)
    boolean = await run_exai("call", "echo", "text=true", "stream_chunks=2", "--stream", env=env)
    assert number.code == 0 and number.out == "42\n", number.err
    assert boolean.code == 0 and boolean.out == "true\n", boolean.err
    bad = await run_exai("call", "echo", "text", env=env)
    assert bad.code == 2 and "expected key=value, got 'text'" in bad.err


async def test_ctrl_c_cancels_the_call_on_the_daemon(tmp_path, daemon_factory, provider_emulator):
    daemon = await daemon_factory(**emulated_providers(provider_emulator))
    marker = f"interrupt-me-{os.getpid()}"
    proc = await spawn_exai("call", "chat", f"prompt=[emulate:latency_ms=20000] {marker}",
                            "--stream", env=_env(tmp_path, daemon))  # fmt: skip
    for _ in range(600):  # until the model call is on its way
        if any(marker in str(r.get("body")) for r in provider_emulator.requests):
            break
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    ran = await finish(proc)
    assert ran.code == 130 and "Traceback" not in ran.err and "cancelled" in ran.err
    assert daemon.core.metrics.calls.counts.get(("chat", "CANCELLED")) == 1
    assert await daemon.services.store.list_threads(ANY_OWNER) == []  # nothing stored


@pytest.mark.parametrize(("url", "expected"), [
    ("ws://127.0.0.1:{http}", "is exai's HTTP port (EXAI_HTTP_PORT"),
    ("http://127.0.0.1:{http}", "is exai's HTTP port (EXAI_HTTP_PORT"),
    ("http://127.0.0.1:{ws}", "is an HTTP URL; exai speaks WebSocket here: use ws://127.0.0.1:"),
    ("127.0.0.1:{ws}", "is not a WebSocket URL; expected ws://HOST:PORT"),
])  # fmt: skip
async def test_a_wrong_url_is_named(tmp_path, daemon_factory, url: str, expected: str):
    daemon = await daemon_factory()
    url = url.format(http=daemon.web.port, ws=daemon.port)
    ran = await run_exai("call", "echo", "text=x", "--url", url, env=_env(tmp_path, daemon))
    assert ran.code == 2 and expected in ran.err and "Traceback" not in ran.err, ran.err
    assert f"ws://127.0.0.1:{daemon.port}" in ran.err or "ws://" in ran.err


async def test_nothing_listening_says_how_to_start_one(tmp_path):
    env = clean_env(tmp_path, EXAI_WS_PORT=str(free_port()))
    ran = await run_exai("tools", env=env)
    assert ran.code == 2 and "nothing is listening there; start the daemon with `exai serve`" in (
        ran.err
    )


async def test_auth_errors_say_where_the_token_goes(tmp_path, daemon_factory):
    daemon = await daemon_factory(ws_token="the-right-token-0123456789")
    missing = await run_exai("tools", env=_env(tmp_path, daemon))
    wrong = await run_exai("tools", "--token", "wrong", env=_env(tmp_path, daemon))
    token_env = _env(tmp_path, daemon, EXAI_WS_TOKEN="the-right-token-0123456789")
    right = await run_exai("tools", env=token_env)
    assert missing.code == 2 and "wants a token (a token is required): set EXAI_WS_TOKEN" in (
        missing.err
    )
    assert wrong.code == 2 and "refused the token (invalid token)" in wrong.err
    assert "~/.config/exai/env" in wrong.err and "the-right-token" not in wrong.err
    assert right.code == 0 and "echo" in right.out


async def test_the_working_directory_is_a_root_for_files(tmp_path, provider_emulator):
    """A project outside the home directory, on a daemon with default roots: the CLI
    offers its working directory, as the shim does for the IDE's project."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("the-file-body-7731\n")
    # Both ports of its own: a developer's daemon may hold the defaults.
    ports = {"EXAI_WS_PORT": str(free_port()), "EXAI_HTTP_PORT": str(free_port())}
    env = clean_env(tmp_path, HOME=str(tmp_path / "home"), **ports,
                    KIMI_API_KEY="sk-test", KIMI_BASE_URL=provider_emulator.base_url_kimi,
                    GLM_API_KEY="test", GLM_BASE_URL=provider_emulator.base_url_glm)  # fmt: skip
    (tmp_path / "home").mkdir()
    daemon = await spawn_exai("serve", env=env)
    try:
        files = f'files=["{project / "notes.txt"}"]'
        for _ in range(600):
            read = await run_exai("call", "chat", "prompt=summarize", files, env=env, cwd=project)
            if "nothing is listening" not in read.err or daemon.returncode is not None:
                break
            await asyncio.sleep(0.05)
        refused = await run_exai("call", "chat", "prompt=summarize", files, "--no-root",
                                 env=env, cwd=project)  # fmt: skip
    finally:
        if daemon.returncode is None:
            daemon.terminate()
        served = await finish(daemon)
    assert read.code == 0, read.err + served.err
    sent = [r for r in provider_emulator.requests if "the-file-body-7731" in str(r.get("body"))]
    assert len(sent) == 1
    assert refused.code == 1 and "FORBIDDEN" in refused.err


async def test_tools_lists_arguments_and_describes_one(tmp_path, daemon_factory):
    daemon = await daemon_factory()
    env = _env(tmp_path, daemon)
    listed = await run_exai("tools", env=env)
    one = await run_exai("tools", "echo", env=env)
    missing = await run_exai("tools", "nope", env=env)
    assert listed.code == 0 and re.search(r"^\s+arguments: prompt\*", listed.out, re.MULTILINE)
    assert one.code == 0 and re.search(r"^\s+stream_chunks\s+\(integer, default 0\)", one.out,
                                       re.MULTILINE)  # fmt: skip
    assert missing.code == 1 and "no tool 'nope' for this token; it may call: " in missing.err


async def test_a_closed_stdout_ends_quietly(tmp_path, daemon_factory):
    daemon = await daemon_factory()
    env = _env(tmp_path, daemon)
    for args in (["tools"], ["config"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before exai writes a byte: `exai ... | head -0`
        proc = await asyncio.create_subprocess_exec(EXAI, *args, stdout=write, env=env,
                                                    stderr=asyncio.subprocess.PIPE)  # fmt: skip
        os.close(write)
        _, err = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode == 141 and b"Traceback" not in err, err


async def test_the_http_port_is_recognised_without_the_setting(tmp_path, daemon_factory):
    """The settings name another HTTP port (the default): the CLI asks the port itself."""
    daemon = await daemon_factory()
    env = clean_env(tmp_path, EXAI_WS_PORT=str(daemon.port))
    ran = await run_exai("tools", "--url", f"ws://127.0.0.1:{daemon.web.port}", env=env)
    assert ran.code == 2 and "is exai's HTTP port (EXAI_HTTP_PORT: /mcp and /v1)" in ran.err


async def test_a_token_in_the_user_settings_file_works_from_any_directory(tmp_path, daemon_factory):
    """`.env` is read only where it is; ~/.config/exai/env wherever exai runs."""
    daemon = await daemon_factory(ws_token="user-file-token-0123456789")
    env = _env(tmp_path, daemon)
    anywhere = tmp_path / "some" / "other" / "directory"
    anywhere.mkdir(parents=True)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / ".env").write_text("EXAI_WS_TOKEN=user-file-token-0123456789\n")
    elsewhere = await run_exai("tools", env=env, cwd=anywhere)
    assert elsewhere.code == 2 and "wants a token" in elsewhere.err  # .env is not read here
    user_file = tmp_path / "config" / "exai" / "env"  # clean_env's XDG_CONFIG_HOME
    user_file.parent.mkdir(parents=True)
    user_file.write_text("EXAI_WS_TOKEN=user-file-token-0123456789\n")
    found = await run_exai("tools", env=env, cwd=anywhere)
    config = await run_exai("config", env=env, cwd=anywhere)
    assert found.code == 0 and "echo" in found.out
    assert f"{user_file} (found)" in config.err and "./.env (not found)" in config.err
