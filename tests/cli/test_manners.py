"""The command line's manners, as a user meets them: a reader that goes away ends a command
quietly with 141, a usage error is one ``exai:`` line and exit 2, what was done is said in
words, help is plain text, and a connection that fails is explained by what answered."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from tests.cli.helpers import EXAI, clean_env, free_port, listening, run_exai

_HAPROXY_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 107\r\n"
                b"cache-control: no-cache\r\ncontent-type: text/html\r\n\r\n"
                b"<html><body><h1>503 Service Unavailable</h1>\n"
                b"No server is available to handle this request.\n</body></html>\n")  # fmt: skip


async def _with_stdout_closed(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run ``exai ARGS`` with a stdout whose reader has gone (``exai ... | head -0``)."""
    read, write = os.pipe()
    os.close(read)
    proc = await asyncio.create_subprocess_exec(EXAI, *args, stdout=write, env=env, cwd=cwd,
                                                stderr=asyncio.subprocess.PIPE)  # fmt: skip
    os.close(write)
    _, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode or 0, err.decode()


async def test_the_store_commands_end_quietly_when_the_reader_goes_away(tmp_path):
    env = clean_env(tmp_path)
    added = await run_exai("memory", "add", "the repo targets Python 3.11", env=env, cwd=tmp_path)
    job = await run_exai("jobs", "add", "echo", "every 1h", "--args", '{"text": "x"}', env=env,
                         cwd=tmp_path)  # fmt: skip
    assert added.code == 0 and job.code == 0, added.err + job.err
    for args in (["conversations", "list"], ["memory", "list"], ["jobs", "list"]):
        code, err = await _with_stdout_closed(*args, env=env, cwd=tmp_path)
        assert (code, err) == (141, ""), args


async def test_bad_jobs_add_arguments_are_a_usage_error(tmp_path):
    env = clean_env(tmp_path)
    for args, said in ((["--args", "{bad"], "exai: --args is not valid JSON ("),
                       (["--args", "[1]"], "exai: --args must be a JSON object"),
                       (["--tz", "Nowhere/Here"], "exai: unknown time zone")):  # fmt: skip
        ran = await run_exai("jobs", "add", "echo", "every 1h", *args, env=env, cwd=tmp_path)
        assert ran.code == 2 and ran.out == "", ran.err
        [line] = ran.err.splitlines()
        assert line.startswith(said), line
    usage = await run_exai("usage", "--since", "last tuesday", env=env, cwd=tmp_path)
    assert usage.code == 2 and usage.err.startswith("exai: ") and usage.out == "", usage.err
    missing = await run_exai("jobs", "show", "job_nope", env=env, cwd=tmp_path)
    assert missing.code == 1 and missing.err.startswith("exai: "), missing.err


async def test_memory_add_says_what_it_did_in_words(tmp_path):
    env = clean_env(tmp_path)
    first = await run_exai("memory", "add", "We chose SQLite", env=env, cwd=tmp_path)
    again = await run_exai("memory", "add", "we chose  sqlite", env=env, cwd=tmp_path)
    assert first.code == 0 and again.code == 0, first.err + again.err
    [memory_id] = re.fullmatch(r"remembered (\S+)\n", first.out).groups()  # type: ignore[union-attr]
    assert again.out == f"already remembered as {memory_id}\n"


async def test_audit_help_is_plain_text(tmp_path):
    ran = await run_exai("audit", "--help", env=clean_env(tmp_path), cwd=tmp_path)
    assert ran.code == 0
    assert "``" not in ran.out and ":mod:" not in ran.out
    text = " ".join(ran.out.split())
    assert "EXAI_DATA_DIR" in text and "queued by replay or quarantine resend" in text


async def test_a_detached_daemons_log_says_exai_serve_started_it(tmp_path):
    env = clean_env(tmp_path, EXAI_WS_PORT=str(free_port()), EXAI_HTTP_PORT=str(free_port()))
    started = await run_exai("serve", "--detach", env=env, cwd=tmp_path)
    try:
        assert started.code == 0, started.err
        log = (tmp_path / "data" / "daemon.log").read_text()
    finally:
        stopped = await run_exai("stop", env=env, cwd=tmp_path)
    assert stopped.code == 0 and not listening(int(env["EXAI_WS_PORT"]))
    [header] = [line for line in log.splitlines() if "starting the daemon" in line]
    assert header.startswith("--- exai serve --detach (pid ") and "shim" not in header, header


async def test_a_503_from_a_proxy_is_not_called_a_wrong_port(tmp_path):
    """HAProxy with no daemon behind it answers every request with 503."""

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_HAPROXY_503)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = clean_env(tmp_path, EXAI_WS_PORT=str(port))
    try:
        ran = await run_exai("tools", env=env, cwd=tmp_path)
    finally:
        server.close()
    [line] = ran.err.splitlines()
    assert ran.code == 2
    assert line.startswith(f"exai: ws://127.0.0.1:{port} answered HTTP 503 Service Unavailable")
    assert "is it exai's WebSocket port" not in line and "no daemon behind it" in line, line
