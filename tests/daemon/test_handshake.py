"""The hello handshake: close codes, tokens, JWTs and session binding."""

from __future__ import annotations

import asyncio
import json
import time

import jwt
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from exai.auth import issue_token
from exai.client import HelloRefused
from exai.protocol import CloseCode, ErrorCode, parse_server_frame

SECRET = "test-jwt-secret-0123456789abcdef0123456789"


async def _close_code(url: str, *frames: str | bytes) -> tuple[int | None, list[str]]:
    received: list[str] = []
    async with connect(url) as ws:
        for frame in frames:
            await ws.send(frame)
        try:
            while True:
                received.append(await ws.recv())  # type: ignore[arg-type]
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd else None), received


async def test_hello_ack_carries_session_and_limits(daemon_factory, client_factory):
    daemon = await daemon_factory(max_frame_bytes=4096, max_inflight_per_session=7)
    client = await client_factory(daemon)
    ack = client.hello
    assert ack is not None and ack.ok and ack.protocol == 1
    assert ack.limits.max_frame_bytes == 4096
    assert ack.limits.max_inflight_per_session == 7
    assert ack.server.name == "exai"
    assert len(ack.session_id) >= 3


async def test_first_frame_not_json_closes_4000(daemon_factory):
    daemon = await daemon_factory()
    code, _ = await _close_code(daemon.url, "this is not json")
    assert code == CloseCode.NOT_JSON


async def test_binary_first_frame_closes_4000(daemon_factory):
    daemon = await daemon_factory()
    code, _ = await _close_code(daemon.url, b"\x00\x01\x02")
    assert code == CloseCode.NOT_JSON


async def test_first_frame_not_hello_closes_4001(daemon_factory):
    daemon = await daemon_factory()
    code, _ = await _close_code(daemon.url, json.dumps({"op": "list_tools", "request_id": "1"}))
    assert code == CloseCode.NOT_HELLO


async def test_hello_timeout_closes_4002(daemon_factory):
    daemon = await daemon_factory(hello_timeout_s=0.2)
    code, _ = await _close_code(daemon.url)
    assert code == CloseCode.HELLO_TIMEOUT


async def test_wrong_token_gets_hello_ack_error_then_4003(daemon_factory):
    daemon = await daemon_factory(ws_token="right-token")
    code, frames = await _close_code(daemon.url, json.dumps({"op": "hello", "token": "wrong"}))
    assert code == CloseCode.UNAUTHORIZED
    ack = parse_server_frame(frames[0])
    assert ack.ok is False and ack.error.code == ErrorCode.UNAUTHORIZED


async def test_missing_token_refused(daemon_factory, client_factory):
    daemon = await daemon_factory(ws_token="right-token")
    with pytest.raises(HelloRefused) as info:
        await client_factory(daemon, None)
    assert info.value.error.code == ErrorCode.UNAUTHORIZED


async def test_several_tokens_name_principals(daemon_factory, client_factory):
    daemon = await daemon_factory(ws_tokens="alice=tok-a,bob=tok-b")
    alice = await client_factory(daemon, "tok-a")
    bob = await client_factory(daemon, "tok-b")
    names = {s.principal.name for s in daemon.core.sessions}
    assert names == {"alice", "bob"}
    assert alice.session_id != bob.session_id


async def test_jwt_accepted_and_expired_jwt_refused(daemon_factory, client_factory):
    daemon = await daemon_factory(jwt_secret=SECRET, jwt_leeway_s=0)
    ok = await client_factory(daemon, issue_token(SECRET, "carol", ttl_s=60))
    assert ok.hello.ok
    expired = jwt.encode({"sub": "carol", "exp": int(time.time()) - 10}, SECRET, "HS256")
    with pytest.raises(HelloRefused) as info:
        await client_factory(daemon, expired)
    assert "expired" in info.value.error.message


async def test_tampered_and_not_yet_valid_jwt_refused(daemon_factory, client_factory):
    daemon = await daemon_factory(jwt_secret=SECRET, jwt_leeway_s=0)
    good = issue_token(SECRET, "carol", ttl_s=60)
    header, payload, sig = good.split(".")
    tampered = f"{header}.{payload}.{sig[:-4]}AAAA"
    with pytest.raises(HelloRefused):
        await client_factory(daemon, tampered)
    future = jwt.encode({"sub": "c", "exp": int(time.time()) + 600,
                         "nbf": int(time.time()) + 300}, SECRET, "HS256")  # fmt: skip
    with pytest.raises(HelloRefused) as info:
        await client_factory(daemon, future)
    assert "not yet valid" in info.value.error.message


async def test_jwt_scopes_restrict_tools(daemon_factory, client_factory):
    daemon = await daemon_factory(jwt_secret=SECRET)
    client = await client_factory(daemon, issue_token(SECRET, "dave", scopes=["version"]))
    assert (await client.call("version")).error is None
    res = await client.call("echo", {"text": "x"})
    assert res.error.code == ErrorCode.FORBIDDEN


async def test_session_resume_by_same_principal(daemon_factory, client_factory):
    daemon = await daemon_factory(ws_tokens="alice=tok-a")
    first = await client_factory(daemon, "tok-a")
    sid = first.session_id
    await first.close()
    again = await client_factory(daemon, "tok-a", session_id=sid)
    assert again.session_id == sid


async def test_resume_by_another_principal_is_unauthorized(daemon_factory, client_factory):
    daemon = await daemon_factory(ws_tokens="alice=tok-a,bob=tok-b")
    alice = await client_factory(daemon, "tok-a")
    with pytest.raises(HelloRefused) as info:
        await client_factory(daemon, "tok-b", session_id=alice.session_id)
    assert info.value.error.code == ErrorCode.UNAUTHORIZED
    # Alice's session is untouched and keeps working.
    assert (await alice.call("echo", {"text": "still mine"})).outputs[0].text == "still mine"


async def test_unsupported_protocol_version_refused(daemon_factory):
    daemon = await daemon_factory()
    code, frames = await _close_code(daemon.url, json.dumps({"op": "hello", "protocol": 99}))
    assert code == CloseCode.NOT_HELLO
    assert "not supported" in parse_server_frame(frames[0]).error.message


async def test_no_token_refused_on_non_loopback(tmp_path):
    from exai.app import App
    from tests.conftest import make_settings

    daemon = App(make_settings(tmp_path, ws_host="0.0.0.0"))
    with pytest.raises(RuntimeError, match="without a token"):
        await daemon.start()
    await asyncio.sleep(0)


def _signed(**claims: object) -> str:
    body = {"sub": "carol", "exp": int(time.time()) + 600, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, SECRET, "HS256")


BADLY_TYPED_CLAIMS = {
    "scopes a number": {"scopes": 5},
    "scopes true": {"scopes": True},
    "scopes an object": {"scopes": {"echo": True}},
    "scopes of numbers": {"scopes": [1, 2]},
    "scopes of lists": {"scopes": [["echo"]]},
    "scopes with a null": {"scopes": ["echo", None]},
    "sub empty": {"sub": ""},
    "sub a number": {"sub": 7},
    "sub a list": {"sub": ["carol"]},
    "exp a string": {"exp": str(int(time.time()) + 600)},
    "exp true": {"exp": True},
    "nbf true": {"nbf": True},
    "iat a string": {"iat": "now"},
}


async def test_correctly_signed_jwts_with_badly_typed_claims_are_refused_4003(daemon_factory):
    daemon = await daemon_factory(jwt_secret=SECRET)
    outcomes = {}
    for name, claims in BADLY_TYPED_CLAIMS.items():
        hello = json.dumps({"op": "hello", "token": _signed(**claims)})
        try:
            async with asyncio.timeout(5):
                code, frames = await _close_code(daemon.url, hello)
        except TimeoutError:
            outcomes[name] = ("still open", "accepted")
            continue
        ack = parse_server_frame(frames[0]) if frames else None
        outcomes[name] = (code, ack.error.code if ack is not None and ack.error else None)
    expected = (CloseCode.UNAUTHORIZED, ErrorCode.UNAUTHORIZED)
    assert {n: o for n, o in outcomes.items() if o != expected} == {}


async def test_scopes_may_be_a_list_or_a_string_of_names(daemon_factory, client_factory):
    daemon = await daemon_factory(jwt_secret=SECRET)
    for scopes in (["version"], "version", "version, status", []):
        client = await client_factory(daemon, _signed(scopes=scopes))
        res = await client.call("echo", {"text": "x"})
        assert res.error is not None and res.error.code == ErrorCode.FORBIDDEN, scopes
    client = await client_factory(daemon, _signed(scopes="version echo"))
    assert (await client.call("echo", {"text": "x"})).error is None


async def test_a_browser_origin_cannot_open_a_websocket(daemon_factory):
    """Any web page may open a WebSocket to loopback; only listed origins are let in."""

    daemon = await daemon_factory(allowed_origins=["https://app.example.com"])
    with pytest.raises(InvalidStatus) as refused:
        async with connect(daemon.url, origin="http://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403
    for origin in ("https://app.example.com", None):  # listed, and a program (no Origin)
        async with connect(daemon.url, origin=origin) as ws:  # type: ignore[arg-type]
            await ws.send(json.dumps({"op": "hello"}))
            assert json.loads(await ws.recv())["ok"] is True
