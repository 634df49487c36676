"""Bodies no face can serve: JSON nested past any sane depth, and a lone surrogate
escape, which no provider request can encode. Every HTTP face refuses them with a
400 in its own error shape naming the problem, before any call, as the WebSocket
face refuses such a frame."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.web.faces import TOKENS, base_url, faces_daemon
from tests.web.helpers import MODERN

DEEP = "[" * 100_000 + "]" * 100_000
LONE = '"\\ud800 and then some"'
BAD = "@bad@"  # where the bad value goes into each face's body
_ASK = [{"role": "user", "content": BAD}]
_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
         "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
_HANDSHAKE = {"MCP-Protocol-Version": "2025-11-25",
              "Accept": "application/json, text/event-stream"}  # fmt: skip

# path, body, extra headers, the face's error shape
FACES: dict[str, tuple[str, dict[str, Any], dict[str, str], str]] = {
    "chat": ("/v1/chat/completions", {"model": "kimi-k2.6", "messages": _ASK}, {}, "openai"),
    "messages": ("/v1/messages", {"model": "kimi-k2.6", "max_tokens": 8, "messages": _ASK},
                 {}, "anthropic"),
    "count_tokens": ("/v1/messages/count_tokens", {"model": "kimi-k2.6", "messages": _ASK},
                     {}, "anthropic"),
    "responses": ("/v1/responses", {"model": "kimi-k2.6", "input": BAD}, {}, "openai"),
    "mcp": ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": BAD}, "_meta": _META}},
            MODERN, "jsonrpc"),
    "mcp-handshake": ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": BAD, "version": "1"}}},
                      _HANDSHAKE, "jsonrpc"),
}  # fmt: skip


def _message(shape: str, body: dict[str, Any]) -> str:
    """The refusal's message, after checking the body has the face's own shape."""
    if shape == "openai":
        error = body["error"]
        assert error["type"] == "invalid_request_error" and {"param", "code"} <= set(error)
        return str(error["message"])
    if shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        return str(body["error"]["message"])
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32700  # JSON-RPC's parse error
    return str(body["error"]["message"])


# What the message says; the handshake era's is the SDK's own, from the same parser.
@pytest.mark.parametrize(
    ("value", "named"),
    [(DEEP, ("recursion limit",)), (LONE, ("surrogate", "hex escape"))],
    ids=["deep", "lone"],
)
async def test_every_face_refuses_a_body_it_cannot_serve_with_a_400(
    tmp_path, emulator, value, named
):
    async with faces_daemon(tmp_path, emulator) as daemon, httpx.AsyncClient(timeout=30) as http:
        answers = {}
        for face, (path, template, extra, shape) in FACES.items():
            headers = {"Authorization": f"Bearer {TOKENS['alice']}",
                       "Content-Type": "application/json", **extra}  # fmt: skip
            body = json.dumps(template).replace(json.dumps(BAD), value)
            answer = await http.post(base_url(daemon, path), content=body, headers=headers)
            answers[face] = (answer.status_code, shape, answer.text)
    for face, (status, shape, text) in answers.items():
        assert status == 400, (face, text[:300])
        message = _message(shape, json.loads(text))
        assert named[0] in message or (face == "mcp-handshake" and named[-1] in message), text
    assert emulator.requests == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("null", "JSON null"),
        *[
            (json.dumps({"model": "kimi-k2.6", "x": 1}).replace("1}", f"{n}}}"), "NaN, Infinity")
            for n in ("NaN", "-Infinity", "1e999999")
        ],
    ],
    ids=["null", "nan", "minus-infinity", "overflowing"],
)
async def test_a_null_body_or_a_number_json_cannot_carry_is_a_400_on_every_v1_face(
    tmp_path, emulator, body, named
):
    # JSON null once read as a client that had left (a 500); NaN, Infinity and an
    # exponent past a float's range reached the provider request and failed there.
    async with faces_daemon(tmp_path, emulator) as daemon, httpx.AsyncClient(timeout=30) as http:
        for face in ("chat", "messages", "count_tokens", "responses"):
            path, _, _, shape = FACES[face]
            headers = {"Authorization": f"Bearer {TOKENS['alice']}",
                       "Content-Type": "application/json"}  # fmt: skip
            answer = await http.post(base_url(daemon, path), content=body, headers=headers)
            assert answer.status_code == 400, (face, answer.text[:300])
            assert named in _message(shape, answer.json()), (face, answer.text[:300])
    assert emulator.requests == []


@pytest.mark.parametrize("face", ["mcp", "mcp-handshake"])
async def test_a_body_over_mcps_limit_is_a_413_in_json_rpcs_shape(tmp_path, emulator, face):
    from exai.web.mcp import MAX_BODY_BYTES

    path, template, extra, _ = FACES[face]
    body = json.dumps(template).replace(json.dumps(BAD), json.dumps("z" * (MAX_BODY_BYTES + 1)))
    async with faces_daemon(tmp_path, emulator) as daemon, httpx.AsyncClient(timeout=30) as http:
        headers = {"Authorization": f"Bearer {TOKENS['alice']}",
                   "Content-Type": "application/json", **extra}  # fmt: skip
        answer = await http.post(base_url(daemon, path), content=body, headers=headers)
    assert answer.status_code == 413
    refused = answer.json()  # once the MCP SDK's plain text
    assert refused["jsonrpc"] == "2.0" and "over" in refused["error"]["message"]
