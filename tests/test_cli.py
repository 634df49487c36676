"""The command line, run as a real subprocess against a real daemon."""

from __future__ import annotations

import asyncio
import os
import sys

import jwt

from exai.cli.call import parse_assignments


def test_parse_assignments_json_or_string():
    assert parse_assignments(["a=1", "b=true", "c=hello", 'd=["x"]']) == {
        "a": 1, "b": True, "c": "hello", "d": ["x"]}  # fmt: skip


async def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exai.cli.main", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_exai_call_prints_result_and_stream(daemon_factory):
    daemon = await daemon_factory()
    code, out, _ = await _run("call", "echo", "text=hello world", "--url", daemon.url)
    assert code == 0 and out.strip() == "hello world"
    code, out, _ = await _run("call", "echo", "--json", '{"text": "abcdef", "stream_chunks": 3}',
                              "--stream", "--url", daemon.url)  # fmt: skip
    assert code == 0 and out.strip() == "abcdef"
    code, _, err = await _run("call", "nope", "--url", daemon.url)
    assert code == 1 and "TOOL_NOT_FOUND" in err


async def test_exai_call_unreachable_daemon_is_a_clear_error():
    code, _, err = await _run("call", "echo", "--url", "ws://127.0.0.1:9")
    assert code == 2 and "cannot reach exai" in err


async def test_config_masks_secrets():
    code, out, _ = await _run("config", env={"EXAI_WS_TOKEN": "tok-visible-nowhere"})
    assert code == 0 and "tok-visible-nowhere" not in out and "EXAI_WS_TOKEN" in out


async def test_invalid_setting_stops_startup_naming_the_variable():
    code, _, err = await _run("serve", env={"EXAI_WS_PORT": "eighty"})
    assert code == 2 and "EXAI_WS_PORT" in err


async def test_token_issue_mints_a_verifiable_jwt():
    secret = "cli-secret-0123456789abcdef0123456789"
    code, out, _ = await _run("token", "issue", "--sub", "erin", "--scopes", "chat", "echo",
                              "--ttl", "120", env={"EXAI_JWT_SECRET": secret})  # fmt: skip
    claims = jwt.decode(out.strip(), secret, algorithms=["HS256"])
    assert code == 0 and claims["sub"] == "erin" and claims["scopes"] == ["chat", "echo"]
    assert "exai_sessions" not in claims and "exai_memory" not in claims
    code, out, _ = await _run("token", "issue", "--sub", "erin", "--sessions", "off",
                              "--memory", "on", env={"EXAI_JWT_SECRET": secret})  # fmt: skip
    claims = jwt.decode(out.strip(), secret, algorithms=["HS256"])
    assert code == 0 and claims["exai_sessions"] is False and claims["exai_memory"] is True


def test_serve_settles_the_startup_heap_out_of_the_collector():
    # What `exai serve` does once started; run here and undone, as it is global state.
    import gc

    from exai.cli.serve import _settle_heap

    try:
        _settle_heap()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
