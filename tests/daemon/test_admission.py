"""Before login, per address: connections that have not said hello, and failed logins."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from exai.admission import Admission, address_key
from exai.client import ExaiClient, HelloRefused
from exai.protocol import CloseCode, ErrorCode, parse_server_frame
from tests.reliability.harness import client_frame, open_raw_websocket, wait_until

# --- connections that have not said hello, per address --------------------------------


async def _upgrade_status(url: str) -> int:
    """101 when the upgrade is accepted (the connection is closed again at once)."""
    try:
        async with connect(url):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


async def test_connections_that_have_not_said_hello_are_limited_per_address(daemon_factory):
    daemon = await daemon_factory(max_unauthenticated_per_ip=2, hello_timeout_s=30)
    first = await open_raw_websocket(daemon.port)
    second = await open_raw_websocket(daemon.port)
    try:
        with pytest.raises(InvalidStatus) as info:
            async with connect(daemon.url):
                pass
        assert info.value.response.status_code == 429
        assert b"have not said hello" in info.value.response.body

        # Once one of them has said hello, it no longer counts.
        first[1].write(client_frame(json.dumps({"op": "hello"})))
        async with connect(daemon.url) as third:
            await third.send(json.dumps({"op": "hello"}))
            assert parse_server_frame(await third.recv()).ok
        # Nor does one that has gone.
        second[1].close()
        await wait_until(lambda: not daemon.core.admission.unauthenticated, 10, "second released")
        assert await _upgrade_status(daemon.url) == 101
    finally:
        first[1].close()
        second[1].close()


async def test_an_upgrade_that_fails_after_the_check_gives_its_place_back(daemon_factory):
    daemon = await daemon_factory(max_unauthenticated_per_ip=1)
    for _ in range(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", daemon.port)
        # An upgrade request without Sec-WebSocket-Key: websockets answers 400.
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n")  # fmt: skip
        assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 400")
        writer.close()
    await wait_until(lambda: not daemon.core.admission.unauthenticated, 10, "places given back")
    async with ExaiClient(daemon.url) as client:
        assert (await client.call("echo", {"text": "in"})).error is None


async def test_a_refused_hello_gives_its_place_back(daemon_factory):
    daemon = await daemon_factory(ws_token="right-token", max_unauthenticated_per_ip=1)
    for _ in range(3):
        with pytest.raises(HelloRefused):
            async with ExaiClient(daemon.url, "wrong", connect_attempts=1):
                pass
    async with ExaiClient(daemon.url, "right-token") as client:
        assert (await client.call("echo", {"text": "in"})).error is None


# --- failed logins ----------------------------------------------------------------------


async def _hello(url: str, token: str) -> tuple[dict, int | None]:
    async with connect(url) as ws:
        await ws.send(json.dumps({"op": "hello", "token": token}))
        ack = json.loads(await ws.recv())
        try:
            await ws.recv()
        except ConnectionClosed as exc:
            return ack, exc.rcvd.code if exc.rcvd else None
    return ack, None


async def test_failed_logins_are_throttled_per_address(daemon_factory):
    daemon = await daemon_factory(
        ws_token="right-token", auth_failures_burst=3, auth_failures_per_min=0.01
    )
    for _ in range(3):
        ack, code = await _hello(daemon.url, "wrong")
        assert code == CloseCode.UNAUTHORIZED and ack["error"]["code"] == "UNAUTHORIZED"
    # Over the allowance, even the right token is refused, without being checked.
    ack, code = await _hello(daemon.url, "right-token")
    assert code == CloseCode.UNAUTHORIZED
    assert ack["ok"] is False and ack["error"]["code"] == ErrorCode.RATE_LIMITED
    assert ack["error"]["retry_after_s"] > 0 and "failed logins" in ack["error"]["message"]
    metrics = daemon.core.metrics.render().decode()
    assert 'exai_auth_failures_total{reason="throttled"} 1.0' in metrics


async def test_successful_logins_are_not_counted(daemon_factory, client_factory):
    daemon = await daemon_factory(
        ws_token="right-token", auth_failures_burst=2, auth_failures_per_min=0.01
    )
    for _ in range(5):
        await client_factory(daemon, "right-token")
    await _hello(daemon.url, "wrong")
    assert (await client_factory(daemon, "right-token")).hello.ok


async def test_the_throttle_is_off_at_zero(daemon_factory, client_factory):
    daemon = await daemon_factory(
        ws_token="right-token", auth_failures_burst=1, auth_failures_per_min=0
    )
    for _ in range(10):
        _, code = await _hello(daemon.url, "wrong")
        assert code == CloseCode.UNAUTHORIZED
    assert (await client_factory(daemon, "right-token")).hello.ok


# --- the bookkeeping, directly ------------------------------------------------------------


def test_addresses_count_as_ipv4_or_ipv6_slash_64():
    assert address_key("192.0.2.7") == "192.0.2.7"
    assert address_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::2")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("fe80::1%eth0") == "fe80::/64"
    assert address_key("/run/exai.sock") == "/run/exai.sock"


def test_admission_counts_each_connection_once():
    admission = Admission(max_unauthenticated=1, failures_per_min=0, failures_burst=1)
    a, b = object(), object()
    assert admission.admit(a, "192.0.2.1") is None
    assert admission.admit(b, "192.0.2.1") is not None
    assert admission.admit(b, "192.0.2.2") is None
    admission.release(a)
    admission.release(a)
    assert admission.unauthenticated == 1
    assert admission.admit(a, "192.0.2.1") is None


def test_failed_logins_use_up_an_allowance_that_refills():
    admission = Admission(max_unauthenticated=1, failures_per_min=60.0, failures_burst=2)
    assert admission.login_failed("192.0.2.1") is False
    assert admission.login_failed("192.0.2.1") is True
    assert 0 < admission.login_wait_s("192.0.2.1") <= 1.0
    assert admission.login_wait_s("192.0.2.2") == 0.0
    admission.sweep()  # not refilled yet: still remembered
    assert admission.login_wait_s("192.0.2.1") > 0
    # Running out again before the allowance was full once more is the same episode.
    assert admission.login_failed("192.0.2.1") is False
