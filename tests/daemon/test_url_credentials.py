"""A password in a URL setting is shown nowhere: not in /ready, the status tool, a
call's error, the log, or ``exai config``.

One ``exai serve`` process whose OpenAI-compatible endpoint URL carries a user and
password and points at a port where nothing listens, so every call to it fails
and the URL is quoted wherever the failure is reported.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from exai.client import ExaiClient
from tests.reliability.harness import DaemonProcess, free_port

TOKEN = "url-credentials-token-5b1e"
PASSWORD = "Pa55-hunter2-in-a-url"


async def _exai_config(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exai.cli.main", "config", *args,
        stdout=asyncio.subprocess.PIPE, env={**os.environ, **env},
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return out.decode()


async def test_a_password_in_a_base_url_is_shown_nowhere(tmp_path: Path):
    url = f"http://exai-user:{PASSWORD}@127.0.0.1:{free_port()}/v1"
    env = {
        "EXAI_WS_TOKEN": TOKEN,
        "EXAI_OPENAI_COMPAT_BASE_URL": url,
        "EXAI_OPENAI_COMPAT_MODELS": "local-model",
        "EXAI_PROVIDER_MAX_RETRIES": "0",
        "EXAI_LOG_FORMAT": "console",
    }
    daemon = DaemonProcess(tmp_path, **env).start()
    try:
        async with ExaiClient(daemon.url, TOKEN) as client:
            failed = await client.call("chat", {"prompt": "hi", "model": "local-model"})
            status = await client.call("status")
        ready = await asyncio.to_thread(daemon.http, "/ready")
    finally:
        daemon.stop()
    assert failed.error is not None and "cannot reach" in failed.error.message
    places = {
        "the call's error": failed.error.message,
        "the status tool": json.dumps(status.model_dump(mode="json")),
        "/ready": ready[1],
        "the log": daemon.log_text(),
        "exai config": await _exai_config(env),
        "exai config --json": await _exai_config(env, "--json"),
    }
    assert {where: PASSWORD in text for where, text in places.items()} == dict.fromkeys(
        places, False
    )
    # Each place still says which endpoint it is about; the log by its provider, as
    # its error text quotes no message (docs/observability.md#privacy).
    for where in ("the call's error", "exai config", "exai config --json"):
        assert "exai-user:****@127.0.0.1" in places[where], where
    assert "PROVIDER_ERROR (openai_compat, connection)" in places["the log"]
