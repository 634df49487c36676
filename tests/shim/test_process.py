"""The shim as a process: stdout is MCP only, it exits with stdin or its parent, and
autostart starts exactly one daemon however many shims race for it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.shim.helpers import DaemonProcess, free_port, shim_command, shim_env

_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip


async def test_stdout_carries_only_mcp_and_logs_go_to_stderr(shared_daemon, tmp_path):
    env = {**os.environ, **shim_env(shared_daemon, EXAI_LOG_LEVEL="info")}
    proc = await asyncio.create_subprocess_exec(
        *shim_command(), env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    messages = [
        _INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "raw"}}},
    ]  # fmt: skip
    assert proc.stdin is not None
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    await proc.stdin.drain()
    lines: list[dict] = []
    assert proc.stdout is not None
    while not {1, 2, 3} <= {m.get("id") for m in lines}:  # requests run concurrently
        line = await asyncio.wait_for(proc.stdout.readline(), 15)
        lines.append(json.loads(line))  # every stdout line is one JSON-RPC message
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 0, "the shim exits cleanly when stdin closes"
    assert out == b"", out
    assert all(m["jsonrpc"] == "2.0" for m in lines)
    assert next(m for m in lines if m.get("id") == 3)["result"]["content"][0]["text"] == "raw"
    assert b"shim starting" in err


def test_shim_exits_when_its_parent_dies(shared_daemon, tmp_path: Path):
    """The parent is killed while stdin stays open (held here): only the ppid poll notices."""
    pid_file = tmp_path / "shim.pid"
    launcher = (
        "import subprocess, sys, time, pathlib\n"
        "p = subprocess.Popen(sys.argv[2:])\n"
        "pathlib.Path(sys.argv[1]).write_text(str(p.pid))\n"
        "time.sleep(3600)\n"
    )
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    parent = subprocess.Popen(
        [sys.executable, "-c", launcher, str(pid_file), *shim_command()],
        stdin=stdin_r, stdout=stdout_w, env={**os.environ, **shim_env(shared_daemon)},
        cwd=tmp_path,
    )  # fmt: skip
    os.close(stdin_r)
    os.close(stdout_w)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        shim = psutil.Process(int(pid_file.read_text()))
        _answers_initialize(stdin_w, stdout_r)  # serving, so its watchdog runs
        assert shim.is_running()
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(shim):
            assert time.monotonic() < deadline, "the orphaned shim kept running"
            time.sleep(0.1)
    finally:
        os.close(stdin_w)
        os.close(stdout_r)
        if parent.poll() is None:
            parent.kill()


def _answers_initialize(stdin_w: int, stdout_r: int, timeout_s: float = 30.0) -> None:
    """Send an MCP initialize on the raw pipe and wait for the shim's answer."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "test", "version": "0"}}}  # fmt: skip
    os.write(stdin_w, (json.dumps(request) + "\n").encode())
    ready, _, _ = select.select([stdout_r], [], [], timeout_s)
    assert ready, "the shim did not answer initialize"
    assert b'"id":1' in os.read(stdout_r, 65536).replace(b" ", b"")


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_autostart_starts_one_daemon_for_racing_shims(tmp_path: Path):
    daemon = DaemonProcess(tmp_path, port=free_port())  # only for its environment
    env = {**os.environ, **shim_env(daemon, EXAI_SHIM_AUTOSTART="true")}
    pids: list[int] = []
    try:
        shims = [
            await asyncio.create_subprocess_exec(
                *shim_command(), env=env, cwd=tmp_path, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
            for _ in range(3)
        ]  # fmt: skip
        answers = await asyncio.gather(
            *(_raw_echo(shim, f"shim{i}") for i, shim in enumerate(shims))
        )
        assert answers == ["shim0", "shim1", "shim2"]
        log = (Path(daemon.env["EXAI_DATA_DIR"]) / "daemon.log").read_text()
        pids = [int(p) for p in re.findall(r"--- daemon pid (\d+)", log)]
        assert len(pids) == 1, log
        for shim in shims:
            assert shim.stdin is not None
            shim.stdin.close()
            await asyncio.wait_for(shim.wait(), 10)
        assert psutil.Process(pids[0]).is_running(), "the daemon outlives the shims"
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGTERM)


async def test_the_autostarted_daemon_gets_exai_settings_and_nothing_else(tmp_path: Path):
    daemon = DaemonProcess(tmp_path, port=free_port())  # only for its environment
    ide = {
        "GITHUB_TOKEN": "ghp-ide-secret",
        "DATABASE_URL": "postgresql://u:ide-secret@db/x",
        "AWS_SECRET_ACCESS_KEY": "aws-ide-secret",
        "ANTHROPIC_API_KEY": "sk-ant-ide-secret",
    }
    settings = {
        "KIMI_API_KEY": "sk-kimi-for-the-daemon",
        "exai_log_format": "json",
        "HTTPS_PROXY": "http://proxy.invalid:3128",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env = {**os.environ, **ide, **settings, **shim_env(daemon, EXAI_SHIM_AUTOSTART="true")}
    pids: list[int] = []
    try:
        shim = await asyncio.create_subprocess_exec(
            *shim_command(), env=env, cwd=tmp_path, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert await _raw_echo(shim, "up") == "up"
        log = (Path(daemon.env["EXAI_DATA_DIR"]) / "daemon.log").read_text()
        pids = [int(p) for p in re.findall(r"--- daemon pid (\d+)", log)]
        seen = psutil.Process(pids[0]).environ()
        assert shim.stdin is not None
        shim.stdin.close()
        await asyncio.wait_for(shim.wait(), 10)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
    for name, value in {**settings, **daemon.env}.items():
        assert seen.get(name) == value, name
    assert seen["HOME"] == os.environ["HOME"], "the daemon's data directory derives from it"
    assert not set(ide) & set(seen), set(ide) & set(seen)


async def _raw_echo(proc: asyncio.subprocess.Process, text: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}  # fmt: skip
    for message in (_INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    await proc.stdin.drain()
    while True:
        message = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
        if message.get("id") == 2:
            return str(message["result"]["content"][0]["text"])


async def test_terminated_shim_cancels_its_calls_on_the_daemon(shared_daemon, tmp_path):
    before = shared_daemon.calls("echo", "CANCELLED")
    env = {**os.environ, **shim_env(shared_daemon)}
    proc = await asyncio.create_subprocess_exec(
        *shim_command(), env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"delay_s": 30}}}  # fmt: skip
    for message in (_INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    await proc.stdin.drain()
    await shared_daemon.wait_for(lambda d: d.gauge("exai_calls_in_flight") >= 1)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 10) == 0
    await shared_daemon.wait_for(lambda d: d.calls("echo", "CANCELLED") == before + 1)
