"""``exai serve`` when it cannot start: one line naming the cause and the setting or port,
a non-zero exit, nothing left running; and ``exai stop``."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest

from exai.app import App
from exai.settings import SettingsError
from tests.cli.helpers import clean_env, finish, free_port, listening, run_exai, spawn_exai
from tests.conftest import make_settings


def _one_line_error(err: str) -> str:
    """The error ``exai serve`` printed: its last line, after any log lines."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("exai: ")]
    assert len(lines) == 1, err
    return lines[0]


def _ports_env(tmp_path: Path, **env: str) -> dict[str, str]:
    ports = {"EXAI_WS_PORT": str(free_port()), "EXAI_HTTP_PORT": str(free_port())}
    return clean_env(tmp_path, **{**ports, **env})


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("EXAI_ROUTING_RULES", "[not json", "not valid JSON"),
        ("EXAI_ROUTING_RULES", '[{"when": {"colour": "red"}, "model": "glm"}]',
         "unknown conditions"),
        ("EXAI_MODELS_FILE", "/nonexistent/models.toml", "cannot read models file"),
        ("EXAI_MCP_SERVERS_FILE", "/nonexistent/servers.json", "cannot read"),
        ("EXAI_WS_TOKENS", "alice:s3cret-value-1", "principal=token"),
        ("EXAI_WS_PORT", "eighty", "integer"),
        ("EXAI_DEFAULT_MODEL", "gpt-nine", "unknown model 'gpt-nine'"),
        ("EXAI_FALLBACK_MODELS", "glm-5.1,no-such-model", "unknown model 'no-such-model'"),
        ("EXAI_FALLBACK_MODELS", "kimi-k2-0905-preview", "retired by Moonshot; use kimi-k2.6"),
        ("EXAI_JWT_SECRET", "short-secret", "too short for HS256"),
    ],
)  # fmt: skip
async def test_a_bad_setting_stops_serve_with_one_line_naming_it(
    tmp_path: Path, setting: str, value: str, expected: str
):
    env = _ports_env(tmp_path, **{setting: value})
    ran = await run_exai("serve", env=env)
    line = _one_line_error(ran.err)
    assert ran.code == 2
    assert line.startswith(f"exai: {setting}: ") and expected in line, line
    assert "s3cret-value-1" not in ran.err  # a token list is a secret: never echoed
    ports = [int(env[name]) for name in ("EXAI_WS_PORT", "EXAI_HTTP_PORT") if name != setting]
    assert not any(listening(port) for port in ports)


@pytest.mark.parametrize(("setting", "value"), [
    ("EXAI_WS_TOKENS", "alice:s3cret-value-1"),
    ("EXAI_DEFAULT_MODEL", "gpt-nine"),
    ("EXAI_ROUTING_RULES", "[not json"),
])  # fmt: skip
async def test_exai_config_refuses_what_serve_refuses(tmp_path: Path, setting: str, value: str):
    ran = await run_exai("config", env=clean_env(tmp_path, **{setting: value}))
    assert ran.code == 2 and _one_line_error(ran.err).startswith(f"exai: {setting}: ")
    assert ran.out == ""


@pytest.mark.parametrize("which", ["EXAI_WS_PORT", "EXAI_HTTP_PORT"])
async def test_a_port_in_use_is_named_and_serve_exits(tmp_path: Path, which: str):
    env = _ports_env(tmp_path)
    taken = int(env[which])
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        ran = await run_exai("serve", env=env)
    line = _one_line_error(ran.err)
    assert ran.code == 1
    assert f"127.0.0.1:{taken} ({which})" in line and "address already in use" in line, line
    other = "EXAI_HTTP_PORT" if which == "EXAI_WS_PORT" else "EXAI_WS_PORT"
    assert not listening(int(env[other]))  # what had started was stopped


async def test_a_second_serve_on_the_same_port_exits_and_the_first_keeps_serving(tmp_path):
    env = _ports_env(tmp_path)
    first = await spawn_exai("serve", env=env)
    try:
        port = int(env["EXAI_WS_PORT"])
        for _ in range(600):
            if listening(port) and listening(int(env["EXAI_HTTP_PORT"])):
                break
            await asyncio.sleep(0.05)
        second = await run_exai("serve", env=env)
        # The HTTP faces listen first (see exai.app), so theirs is the port named.
        line = _one_line_error(second.err)
        assert second.code == 1 and f":{env['EXAI_HTTP_PORT']} (EXAI_HTTP_PORT)" in line
        called = await run_exai("call", "echo", "text=still here", env=env)
        assert called.code == 0 and called.out.strip() == "still here"
    finally:
        first.terminate()
        await finish(first)


async def test_an_unreachable_database_names_its_setting(tmp_path: Path):
    env = _ports_env(tmp_path, EXAI_STORE_URL=f"postgresql://u:pw-hidden@127.0.0.1:{free_port()}/x")
    ran = await run_exai("serve", env=env)
    line = _one_line_error(ran.err)
    assert ran.code == 1 and "(EXAI_STORE_URL)" in line and "pw-hidden" not in ran.err


async def test_a_failed_start_leaves_no_thread_behind(tmp_path: Path):
    """What kept `exai serve` alive after printing its error: the audit outbox's and the
    SQLite store's threads, opened before the providers failed, were never closed."""
    settings = make_settings(tmp_path, routing_rules="[not json", audit_enabled=True,
                             audit_sink="none")  # fmt: skip
    before = set(threading.enumerate())
    with pytest.raises(SettingsError, match="EXAI_ROUTING_RULES"):
        await App(settings).start()

    def left() -> list[str]:
        return [t.name for t in threading.enumerate()
                if t not in before and t.is_alive() and not t.daemon
                and not t.name.startswith("asyncio_")]  # fmt: skip

    for _ in range(200):  # a thread told to stop ends on its own, soon after
        if not left():
            break
        await asyncio.sleep(0.05)
    assert left() == []


async def test_exai_stop_stops_the_daemon_its_pid_file_names(tmp_path: Path):
    env = _ports_env(tmp_path, EXAI_SHUTDOWN_GRACE_S="5")
    daemon = await spawn_exai("serve", env=env)
    pid_file = tmp_path / "data" / f"daemon-{env['EXAI_WS_PORT']}.pid"
    for _ in range(600):
        if pid_file.exists():
            break
        await asyncio.sleep(0.05)
    stopped = await run_exai("stop", env=env)
    ran = await finish(daemon)
    assert stopped.code == 0 and f"pid {daemon.pid}" in stopped.err
    assert ran.code == 0 and not pid_file.exists()
    again = await run_exai("stop", env=env)
    assert again.code == 1 and "no pid file" in again.err


async def test_serve_detach_returns_once_listening_and_reports_a_failed_start(tmp_path: Path):
    env = _ports_env(tmp_path)
    started = await run_exai("serve", "--detach", env=env)
    try:
        assert started.code == 0 and "runs in the background (pid " in started.err
        assert listening(int(env["EXAI_WS_PORT"]))  # it returned once the daemon listened
        again = await run_exai("serve", "--detach", env=env)
        assert again.code == 0 and "already listens" in again.err
        taken = {**env, "EXAI_WS_PORT": str(free_port()), "EXAI_DATA_DIR": str(tmp_path / "d2")}
        failed = await run_exai("serve", "--detach", env=taken)  # its HTTP port is in use
        assert failed.code == 1 and "(EXAI_HTTP_PORT): address already in use" in failed.err
    finally:
        stopped = await run_exai("stop", env=env)
    assert stopped.code == 0 and not listening(int(env["EXAI_WS_PORT"]))


def test_every_command_s_parser_is_built_without_the_daemon_the_faces_or_mcp():
    """`exai` imports every command's module to build its parser, on every run (and the
    tests run it hundreds of times): one that imports the daemon, the console or the MCP
    SDK at module level made every command twice as slow to start."""
    import subprocess
    import sys

    heavy = "('mcp', 'jinja2', 'starlette', 'exai.daemon', 'exai.web', 'exai.bridge')"
    code = ("import sys; from exai.cli.main import build_parser; build_parser(); "
            f"print(' '.join(m for m in sys.modules if m.startswith({heavy})))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.split() == []
