"""``exai keys`` on the store two daemons share (Postgres): a key the CLI made signs
in on both; revoked by the CLI, both refuse it within a second, on the WebSocket
and over HTTP; ``rotate`` and ``revoke --jti`` likewise. The key is printed once
and never again (``list``, ``--json``), and bad input exits 2 with its reason."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from exai.auth import issue_token
from exai.cli.main import main
from exai.client import ExaiClient, HelloRefused
from tests.conftest import emulated_providers, make_settings, running_daemon

SECRET = "keys-cluster-jwt-secret-0123456789"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["keys", *argv])
    out, err = capsys.readouterr()
    return code, out, err


async def _acli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, ["keys", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_prints_a_key_once_and_names_bad_input(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_STORE_URL", f"sqlite:///{tmp_path / 'keys.sqlite3'}")
    code, out, err = _cli(capsys, "create", "--principal", "bob", "--scopes", "chat,completion",
                          "--budget", "5 USD/day", "--rate", "60/min", "--models",
                          "kimi-k2.6,glm-5.1", "--expires", "30d", "--name", "laptop")  # fmt: skip
    assert code == 0, err
    token = out.strip()
    secret = token.split("_", 2)[2]
    key_id = token.split("_")[1]
    assert token.startswith("exai_") and "only time" in err and secret not in err

    code, out, _ = _cli(capsys, "list")
    assert code == 0 and key_id in out and "laptop" in out and "5 USD/day" in out
    assert "chat,completion" in out and "glm-5.1,kimi-k2.6" in out and "60/min" in out
    assert "active" in out and secret not in out
    code, out, _ = _cli(capsys, "list", "--json")
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["id"] == key_id and row["spent"] == "0" and secret not in out

    code, out, err = _cli(capsys, "update", key_id, "--rate", "120/min", "--expires", "",
                          "--budget", "7 USD/month")  # fmt: skip
    assert code == 0 and "rate 120/min" in out and "expires never" in out, err
    assert "budget 7 USD/month" in out

    code, out, err = _cli(capsys, "rotate", key_id)
    assert code == 0 and out.strip().startswith("exai_") and out.strip() != token
    code, out, _ = _cli(capsys, "list", "--json")
    states = {json.loads(line)["id"]: json.loads(line)["state"] for line in out.splitlines()}
    assert states[key_id] == "revoked" and list(states.values()).count("active") == 1

    for argv, words in [(["create", "--principal", "bob", "--rate", "fast"], "rate"),
                        (["create", "--principal", "bob", "--expires", "soon"], "expires"),
                        (["create", "--principal", "bob", "--budget", "5"], "budget"),
                        (["revoke"], "one of them")]:  # fmt: skip
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and words in err, (argv, err)
    code, _, err = _cli(capsys, "revoke", "0123456789ab")
    assert code == 1 and "no key" in err


async def test_a_revocation_reaches_every_daemon_on_the_store_within_a_second(
    tmp_path: Path, emulator: Any, postgres_server: Any, monkeypatch, capsys
) -> None:
    url = postgres_server.create_database(f"keys_{uuid.uuid4().hex[:8]}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_STORE_URL", url)
    async with AsyncExitStack() as stack:
        daemons = [
            await stack.enter_async_context(running_daemon(make_settings(
                tmp_path / f"d{n}", store_url=url, ws_tokens="alice=tok-alice-0123456789",
                jwt_secret=SECRET, memory_enabled=False, **emulated_providers(emulator))))
            for n in (1, 2)
        ]  # fmt: skip
        code, out, err = await _acli(capsys, "create", "--principal", "bob", "--scopes", "echo")
        assert code == 0, err
        token = out.strip()
        key_id = token.split("_")[1]
        jwt = issue_token(SECRET, "erin", jti="erin-phone")

        async def http_status(n: int, credential: str) -> int:
            web = daemons[n].web
            assert web is not None
            bearer = {"Authorization": f"Bearer {credential}"}
            async with httpx.AsyncClient() as http:
                answer = await http.get(f"http://127.0.0.1:{web.port}/v1/models", headers=bearer)
                return answer.status_code

        async def until(check: Any) -> float:
            start = time.monotonic()
            while not await check():
                assert time.monotonic() - start < 1.0, "not within a second"
                await asyncio.sleep(0.02)
            return time.monotonic() - start

        # Made by the CLI: both daemons let it in within a second (on the WebSocket too).
        await until(lambda: _both(http_status, token, 200))
        open_ws = [ExaiClient(daemon.url, token, reconnect=False) for daemon in daemons]
        for ws in open_ws:
            await ws.connect()
            assert (await ws.call("echo", {"text": "hi"})).error is None
        code, out, err = await _acli(capsys, "revoke", key_id)
        assert code == 0 and "revoked" in out, err
        await until(lambda: _both(http_status, token, 401))
        # A connection opened before the revocation has its next call refused.
        for ws in open_ws:
            refused = await ws.call("echo", {"text": "hi"})
            assert refused.error is not None and refused.error.code.value == "UNAUTHORIZED"
            assert "this key was revoked" in refused.error.message
            await ws.close()
        for daemon in daemons:
            with pytest.raises(HelloRefused) as info:
                await ExaiClient(daemon.url, token, reconnect=False).connect()
            assert "this key was revoked" in info.value.error.message

        assert await _both(http_status, jwt, 200)
        code, out, err = await _acli(capsys, "revoke", "--jti", "erin-phone", "--note", "lost")
        assert code == 0 and "revoked" in out, err
        await until(lambda: _both(http_status, jwt, 401))

    # When each daemon last saw the key was written in a batch (at the latest as it stopped).
    code, out, _ = await _acli(capsys, "list", "--json")
    (row,) = [json.loads(line) for line in out.splitlines() if key_id in line]
    assert row["state"] == "revoked" and row["last_used_at"] is not None


async def _both(status: Any, credential: str, expected: int) -> bool:
    return all([await status(n, credential) == expected for n in (0, 1)])
