"""Who may use the HTTP faces, as the audit trail and the scopes see it: a refused
sign-in on any face is an ``auth_failed`` event (without the token), and a token's
scopes hold on ``/v1/messages/count_tokens`` as on ``/v1/messages``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from exai.auth import issue_token
from tests.web.faces import TOKENS, base_url, faces_daemon
from tests.web.helpers import MODERN, tools_call

SECRET = "http-auth-test-secret-0123456789abcdef"
ASK = [{"role": "user", "content": "hi"}]
AUDIT = {"audit_enabled": True, "audit_sink": "jsonl", "audit_ship_interval_s": 0.1}
WRONG = "tok-wrong-9876543210"


def _audited(sink: Path, kind: str) -> list[dict[str, Any]]:
    lines = sink.read_text().splitlines() if sink.exists() else []
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


async def test_a_refused_sign_in_on_each_face_is_audited_without_its_token(tmp_path, emulator):
    expired = issue_token(SECRET, "carol", ttl_s=-3600)
    # (face, path, headers, body): a wrong token on each face, then none, an expired JWT,
    # and an Authorization header that is not a bearer token.
    tries = [
        ("openai", "/v1/chat/completions", {"Authorization": f"Bearer {WRONG}"},
         {"model": "kimi-k2.6", "messages": ASK}),
        ("openai", "/v1/models", {"Authorization": f"Bearer {WRONG}"}, None),
        ("anthropic", "/v1/messages", {"x-api-key": WRONG},
         {"model": "kimi-k2.6", "max_tokens": 8, "messages": ASK}),
        ("anthropic", "/v1/messages/count_tokens", {"Authorization": f"Bearer {WRONG}"},
         {"model": "kimi-k2.6", "messages": ASK}),
        ("responses", "/v1/responses", {"Authorization": f"Bearer {WRONG}"},
         {"model": "kimi-k2.6", "input": "hi"}),
        ("mcp-http", "/mcp", {**MODERN, "Authorization": f"Bearer {WRONG}"}, tools_call()),
        ("openai", "/v1/chat/completions", {}, {"model": "kimi-k2.6", "messages": ASK}),
        ("anthropic", "/v1/messages", {"Authorization": f"Bearer {expired}"},
         {"model": "kimi-k2.6", "max_tokens": 8, "messages": ASK}),
        ("mcp-http", "/mcp", {**MODERN, "Authorization": f"Basic {WRONG}"}, tools_call()),
    ]  # fmt: skip
    sink = tmp_path / "audit.jsonl"
    settings = {**AUDIT, "audit_jsonl_path": sink, "jwt_secret": SECRET}
    async with faces_daemon(tmp_path, emulator, **settings) as daemon, httpx.AsyncClient() as http:
        for _, path, headers, body in tries:
            method = "GET" if body is None else "POST"
            answer = await http.request(method, base_url(daemon, path), headers=headers, json=body)
            assert answer.status_code == 401, (path, answer.text)
        allowed = await http.get(
            base_url(daemon, "/v1/models"), headers={"Authorization": f"Bearer {TOKENS['bob']}"}
        )
        assert allowed.status_code == 200
    events = _audited(sink, "auth_failed")
    assert [e["face"] for e in events] == [face for face, *_ in tries]
    assert all(e["peer"] == "127.0.0.1" and e["reason"] for e in events)
    assert [e["reason"] for e in events][6:8] == ["a token is required", "token expired"]
    text = sink.read_text()
    assert WRONG not in text and expired not in text


async def test_refusals_while_an_address_is_throttled_are_not_audited_one_by_one(
    tmp_path, emulator
):
    sink = tmp_path / "audit.jsonl"
    settings = {**AUDIT, "audit_jsonl_path": sink, "auth_failures_burst": 2,
                "auth_failures_per_min": 1}  # fmt: skip
    async with faces_daemon(tmp_path, emulator, **settings) as daemon, httpx.AsyncClient() as http:
        for _ in range(5):
            answer = await http.get(
                base_url(daemon, "/v1/models"), headers={"Authorization": f"Bearer {WRONG}"}
            )
            assert answer.status_code == 401
        assert "too many failed logins" in answer.json()["error"]["message"]
    assert len(_audited(sink, "auth_failed")) == 2


@pytest.mark.parametrize("scopes", [["chat"], ["exai:admin"]])
async def test_count_tokens_holds_a_token_to_its_scopes_as_messages_does(
    tmp_path, emulator, scopes
):
    narrow = issue_token(SECRET, "carol", scopes, ttl_s=600)
    full = issue_token(SECRET, "carol", ["completion"], ttl_s=600)
    count = {"model": "kimi-k2.6", "messages": ASK}
    message = {**count, "max_tokens": 8}
    async with faces_daemon(tmp_path, emulator, jwt_secret=SECRET) as daemon:
        async with httpx.AsyncClient(base_url=base_url(daemon)) as http:
            refused = {
                path: await http.post(path, json=body, headers={"x-api-key": narrow})
                for path, body in (("/messages/count_tokens", count), ("/messages", message))
            }
            counted = await http.post(
                "/messages/count_tokens", json=count, headers={"x-api-key": full}
            )
    for path, answer in refused.items():
        assert answer.status_code == 403, (path, answer.text)
        body = answer.json()
        assert body["type"] == "error" and body["error"]["type"] == "permission_error", path
        assert "completion" in body["error"]["message"]
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert emulator.requests == []
