"""An operator's key through ``/admin/keys`` and on every face: made by an operator
only, shown once, used on the WebSocket, the MCP shim, ``/mcp``, a model face and the console's
sign-in, its budget held, and refused everywhere once revoked, saying so; a JWT
refused by its ``jti``; the secret nowhere after creation (the list, the audit
trail, the daemon's log)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from exai.auth import issue_token
from exai.client import ExaiClient, HelloRefused
from tests.shim.helpers import mcp_session, shim_env
from tests.web.faces import TOKENS, base_url, faces_daemon
from tests.web.helpers import MODERN, tools_call

SECRET = "keys-jwt-secret-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {TOKENS['alice']}"}
ASK = [{"role": "user", "content": "hi"}]


def _settings(tmp_path: Path) -> dict[str, Any]:
    return {"admin_principals": ["alice"], "jwt_secret": SECRET, "audit_enabled": True,
            "audit_sink": "jsonl", "audit_jsonl_path": tmp_path / "audit.jsonl",
            "audit_ship_interval_s": 0.1}  # fmt: skip


async def _refused_within(check: Any, seconds: float = 1.0) -> float:
    """How long until ``check()`` says the key is refused (fails past ``seconds``)."""
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < seconds, "still accepted"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def _console_sign_in(http: httpx.AsyncClient, token: str) -> httpx.Response:
    form = await http.get("/console/login", params={"next": "/console/threads"})
    login = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert login is not None
    return await http.post("/console/login", data={"login_token": login.group(1),
                           "token": token, "next": "/console/threads"})  # fmt: skip


async def test_a_key_works_on_every_face_until_revoked(tmp_path, emulator, capfd, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with faces_daemon(tmp_path, emulator, **_settings(tmp_path)) as daemon:
        base = base_url(daemon, "")
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx.AsyncClient(base_url=base))
            made = await http.post("/admin/keys", headers=ADMIN, json={
                "principal": "bob", "scopes": "echo,completion", "rate": "60/min",
                "models": ["kimi-k2.6"], "expires": "30d", "name": "ci"})  # fmt: skip
            assert made.status_code == 201, made.text
            token, key = made.json()["token"], made.json()["key"]
            secret = token.split("_", 2)[2]
            assert token.startswith(f"exai_{key['id']}_") and key["state"] == "active"
            assert key["scopes"] == ["completion", "echo"] and key["rate_per_min"] == 60
            bearer = {"Authorization": f"Bearer {token}"}

            # The WebSocket face: hello, then a call within the key's scopes and not outside.
            ws = ExaiClient(daemon.url, token)
            await ws.connect()
            try:
                assert (await ws.call("echo", {"text": "ws"})).error is None
                assert (await ws.call("version")).error.code.value == "FORBIDDEN"
            finally:
                await ws.close()
            # MCP over HTTP.
            mcp = await http.post("/mcp", headers={**MODERN, **bearer}, json=tools_call())
            assert mcp.status_code == 200 and "hi" in mcp.text
            # A model face.
            chat = await http.post("/v1/chat/completions", headers=bearer,
                                   json={"model": "kimi-k2.6", "messages": ASK})  # fmt: skip
            assert chat.status_code == 200, chat.text
            # The console's sign-in (a browser of its own).
            browser = await stack.enter_async_context(httpx.AsyncClient(base_url=base))
            signed = await _console_sign_in(browser, token)
            assert signed.status_code == 303 and signed.headers["location"] == "/console/threads"
            page = await browser.get("/console/threads")
            assert page.status_code == 200 and "bob" in page.text

            listed = (await http.get("/admin/keys", headers=ADMIN)).json()["keys"]
            assert [k["id"] for k in listed] == [key["id"]]
            assert secret not in json.dumps(listed) and "secret_hash" not in listed[0]

            # Revoked through the API: every face refuses it within a second, saying why.
            gone = await http.delete(f"/admin/keys/{key['id']}", headers=ADMIN)
            assert gone.status_code == 200 and gone.json()["key"]["state"] == "revoked"

            async def models_refused() -> bool:
                answer = await http.get("/v1/models", headers=bearer)
                return answer.status_code == 401

            await _refused_within(models_refused)
            refused = await http.get("/v1/models", headers=bearer)
            assert "this key was revoked" in refused.json()["error"]["message"]
            mcp = await http.post("/mcp", headers={**MODERN, **bearer}, json=tools_call())
            assert mcp.status_code == 401
            with pytest.raises(HelloRefused) as info:
                await ExaiClient(daemon.url, token, reconnect=False).connect()
            assert "this key was revoked" in info.value.error.message
            signed = await _console_sign_in(http, token)
            assert signed.status_code != 303 and "revoked" in signed.text
            # The console session signed in with it has ended.
            ended = await browser.get("/console/threads", follow_redirects=False)
            assert ended.status_code == 303 and "/console/login" in ended.headers["location"]

        await asyncio.sleep(0.3)  # the audit trail writes its sink in batches
    audit = (tmp_path / "audit.jsonl").read_text()
    assert key["id"] in audit and '"key.created"' in audit and '"key.revoked"' in audit
    assert secret not in audit
    # Neither in the daemon's log (structlog writes to the process's stdout or stderr)
    # nor in what the standard library's loggers said (the HTTP server, the MCP SDK).
    out, err = capfd.readouterr()
    assert secret not in out + err and secret not in caplog.text


async def test_only_an_operator_reaches_the_keys_and_bad_input_is_named(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator, **_settings(tmp_path)) as daemon:
        async with httpx.AsyncClient(base_url=base_url(daemon, "")) as http:
            bob = {"Authorization": f"Bearer {TOKENS['bob']}"}
            for method, path in [("GET", "/admin/keys"), ("POST", "/admin/keys"),
                                 ("DELETE", "/admin/keys/0123456789ab"),
                                 ("POST", "/admin/keys/0123456789ab/rotate"),
                                 ("POST", "/admin/revoked-jtis")]:  # fmt: skip
                answer = await http.request(method, path, headers=bob, json={"principal": "bob"})
                assert answer.status_code == 403, (method, path)
                assert answer.json()["error"]["code"] == "FORBIDDEN"
                assert (await http.request(method, path)).status_code == 401
            # A cookie is not a credential here: a signed-in console session does not help.
            assert (await _console_sign_in(http, TOKENS["alice"])).status_code == 303
            assert (await http.get("/admin/keys")).status_code == 401
            http.cookies.clear()

            for body, words in [
                ({"principal": "bob", "rate": "lots"}, "rate"),
                ({"principal": "bob", "budget": "5 dollars"}, "budget"),
                ({"principal": "bob", "expires": "yesterday"}, "expires"),
                ({"principal": ""}, "principal"),
                ({"principal": "bob", "colour": "red"}, "unknown fields"),
            ]:
                answer = await http.post("/admin/keys", headers=ADMIN, json=body)
                assert answer.status_code == 400, body
                error = answer.json()["error"]
                assert error["code"] == "VALIDATION_ERROR" and words in error["message"]
            missing = await http.post("/admin/keys/0123456789ab/rotate", headers=ADMIN)
            assert missing.status_code == 404 and "no key" in missing.json()["error"]["message"]
            assert (await http.post("/admin/keys", headers=ADMIN, content=b"[1]",
                                    )).status_code == 400  # fmt: skip


async def test_rotate_keeps_the_settings_and_a_jwt_is_refused_by_its_jti(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator, **_settings(tmp_path)) as daemon:
        async with httpx.AsyncClient(base_url=base_url(daemon, "")) as http:
            grant = {"principal": "bob", "budget": "5 USD/day", "models": "kimi-k2.6"}
            made = (await http.post("/admin/keys", headers=ADMIN, json=grant)).json()
            old = made["token"]
            turned = await http.post(f"/admin/keys/{made['key']['id']}/rotate", headers=ADMIN)
            assert turned.status_code == 201
            new, key = turned.json()["token"], turned.json()["key"]
            assert key["id"] != made["key"]["id"] and new != old
            assert (key["budget"], key["models"]) == (made["key"]["budget"], ["kimi-k2.6"])

            async def old_refused() -> bool:
                answer = await http.get("/v1/models", headers={"Authorization": f"Bearer {old}"})
                return answer.status_code == 401

            await _refused_within(old_refused)
            fresh = await http.get("/v1/models", headers={"Authorization": f"Bearer {new}"})
            assert fresh.status_code == 200

            token = issue_token(SECRET, "dave", jti="laptop-2026")
            other = issue_token(SECRET, "dave")
            bearer = {"Authorization": f"Bearer {token}"}
            assert (await http.get("/v1/models", headers=bearer)).status_code == 200
            done = await http.post("/admin/revoked-jtis", headers=ADMIN,
                                   json={"jti": "laptop-2026", "note": "lost"})  # fmt: skip
            assert done.json() == {"jti": "laptop-2026", "added": True}

            async def refused() -> bool:
                return (await http.get("/v1/models", headers=bearer)).status_code == 401

            await _refused_within(refused)
            answer = await http.get("/v1/models", headers=bearer)
            assert "this token was revoked" in answer.json()["error"]["message"]
            assert (await http.get("/v1/models", headers={"Authorization": f"Bearer {other}"}
                                   )).status_code == 200  # fmt: skip


async def test_a_budget_on_a_key_is_held_with_the_documented_message(tmp_path, emulator):
    async with faces_daemon(tmp_path, emulator, **_settings(tmp_path)) as daemon:
        async with httpx.AsyncClient(base_url=base_url(daemon, "")) as http:
            made = (await http.post("/admin/keys", headers=ADMIN, json={
                "principal": "carol", "budget": "0 USD/day"})).json()  # fmt: skip
            answer = await http.post("/v1/chat/completions",
                                     headers={"Authorization": f"Bearer {made['token']}"},
                                     json={"model": "kimi-k2.6", "messages": ASK})  # fmt: skip
            assert answer.status_code == 402, answer.text
            message = answer.json()["error"]["message"]
            assert "principal 'carol' has spent 0 USD of its budget of 0 USD per UTC day" in message
            # Raised at run time, without a restart: served again.
            raised = await http.patch(f"/admin/keys/{made['key']['id']}", headers=ADMIN,
                                      json={"budget": "5 USD/day"})  # fmt: skip
            assert raised.status_code == 200 and raised.json()["key"]["budget"]["amount"] == "5"
            again = await http.post("/v1/chat/completions",
                                    headers={"Authorization": f"Bearer {made['token']}"},
                                    json={"model": "kimi-k2.6", "messages": ASK})  # fmt: skip
            assert again.status_code == 200, again.text
            listed = (await http.get(f"/admin/keys/{made['key']['id']}", headers=ADMIN)).json()
            assert listed["key"]["spent"] != "0"  # the call's cost, from the cost rows
            refused = await http.patch(f"/admin/keys/{made['key']['id']}", headers=ADMIN,
                                       json={"principal": "mallory"})  # fmt: skip
            assert refused.status_code == 400 and "cannot be changed" in refused.text


async def test_a_key_works_through_the_mcp_shim_until_revoked(tmp_path, emulator) -> None:
    async with faces_daemon(tmp_path, emulator, **_settings(tmp_path)) as daemon:
        assert daemon.core.key_admin is not None
        key, token = await daemon.core.key_admin.create_key({"principal": "bob"}, by="test")
        env = shim_env(None, EXAI_WS_HOST="127.0.0.1", EXAI_WS_PORT=str(daemon.port),
                       EXAI_WS_TOKEN=token, EXAI_DATA_DIR=str(tmp_path / "shim"))  # fmt: skip
        async with mcp_session(env, tmp_path) as mcp:
            answer = await mcp.call_tool("echo", {"text": "through the shim"})
            assert not answer.is_error
            await daemon.core.key_admin.revoke_key(key["id"], by="test")
            refused = await mcp.call_tool("echo", {"text": "again"})
            assert refused.is_error
            text = " ".join(getattr(c, "text", "") for c in refused.content)
            assert "this key was revoked" in text
