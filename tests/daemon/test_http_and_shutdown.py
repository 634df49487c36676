"""HTTP endpoints on the WebSocket port, and graceful shutdown."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
from websockets.exceptions import ConnectionClosed

from exai.client import ExaiClient
from exai.protocol import ErrorCode
from tests.conftest import make_settings, running_daemon
from tests.daemon.tools import CountingTool
from tests.reliability.harness import wait_until


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


async def test_health_ready_metrics(daemon_factory, client_factory):
    daemon = await daemon_factory()
    client = await client_factory(daemon)
    await client.call("echo", {"text": "x"})
    await client.call("nope", {})
    base = f"http://127.0.0.1:{daemon.port}"
    status, ctype, body = await asyncio.to_thread(_get, base + "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, _, body = await asyncio.to_thread(_get, base + "/ready")
    ready = json.loads(body)
    assert status == 200 and ready["ready"] is True
    assert ready["checks"]["store"] == {"ok": True}
    status, ctype, body = await asyncio.to_thread(_get, base + "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    assert 'exai_calls_total{status="ok",tool="echo"} 1.0' in body
    assert 'exai_calls_total{status="TOOL_NOT_FOUND",tool="unknown"} 1.0' in body
    assert "exai_connections 1.0" in body
    assert "exai_call_latency_seconds_bucket" in body
    assert "exai_queue_wait_seconds" in body
    status, _, _ = await asyncio.to_thread(_get, base + "/nothing-here")
    assert status == 404


def _get_with(url: str, token: str | None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


async def test_with_tokens_ready_and_metrics_reveal_nothing_to_a_caller_without_one(
    daemon_factory,
):
    daemon = await daemon_factory(ws_token="probe-token")
    base = f"http://127.0.0.1:{daemon.port}"
    status, headers, body = await asyncio.to_thread(_get_with, base + "/metrics", None)
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="exai"'
    assert "exai_calls_total" not in body
    status, _, body = await asyncio.to_thread(_get_with, base + "/metrics", "wrong")
    assert status == 401
    status, _, body = await asyncio.to_thread(_get_with, base + "/metrics", "probe-token")
    assert status == 200 and "exai_connections" in body
    status, _, body = await asyncio.to_thread(_get_with, base + "/ready", None)
    assert status == 200 and json.loads(body) == {"ready": True}  # a probe's answer, no more
    status, _, body = await asyncio.to_thread(_get_with, base + "/ready", "probe-token")
    assert status == 200 and "store" in json.loads(body)["checks"]
    status, _, body = await asyncio.to_thread(_get_with, base + "/health", None)
    assert status == 200


async def test_ready_is_503_when_the_store_cannot_answer(daemon_factory):
    daemon = await daemon_factory()
    await daemon.services.store.aclose()  # as if the database went away
    status, _, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{daemon.port}/ready")
    checks = json.loads(body)["checks"]
    assert status == 503 and checks["store"]["ok"] is False and checks["store"]["error"]


async def test_not_ready_and_new_calls_refused_while_draining(tmp_path):
    """Once a shutdown begins, calls still running get their grace period, the daemon
    says it is not ready, and a client still connected gets OVER_CAPACITY, retryable."""
    tool = CountingTool()
    async with running_daemon(make_settings(tmp_path), [tool]) as daemon:
        client = ExaiClient(daemon.url)
        await client.connect()
        long_call = asyncio.create_task(client.call("count", {"seconds": 1.0, "label": "x"}))
        await tool.started.wait()
        stopping = asyncio.create_task(daemon.stop(grace_s=5.0))
        await wait_until(lambda: daemon.core.draining, 10, "the shutdown has begun")
        ready, checks = await daemon.core.readiness()
        assert ready is False and checks["server"]["ok"] is False
        res = await client.call("echo", {})
        assert res.error is not None and res.error.code == ErrorCode.OVER_CAPACITY
        assert res.error.retryable
        assert (await long_call).outputs[0].text == "x:1"
        await stopping
        await client.close()


async def test_graceful_shutdown_lets_inflight_call_finish(tmp_path):
    tool = CountingTool()
    settings = make_settings(tmp_path)
    async with running_daemon(settings, [tool]) as daemon:
        client = ExaiClient(daemon.url)
        await client.connect()
        call = asyncio.create_task(client.call("count", {"seconds": 0.5, "label": "x"}))
        await tool.started.wait()
        await daemon.stop(grace_s=5.0)
        res = await call
        assert res.error is None and res.outputs[0].text == "x:1"
        assert not client.connected
        assert client.last_close_code == 1001
        await client.close()
    assert tool.completed == 1 and tool.cancelled == 0


async def test_shutdown_closes_with_1001_and_cancels_after_grace(tmp_path):
    tool = CountingTool()
    async with running_daemon(make_settings(tmp_path), [tool]) as daemon:
        from websockets.asyncio.client import connect

        async with connect(daemon.url) as ws:
            await ws.send(json.dumps({"op": "hello"}))
            await ws.recv()
            await ws.send(json.dumps({"op": "call_tool", "request_id": "long", "name": "count",
                                      "arguments": {"seconds": 30}}))  # fmt: skip
            await ws.recv()  # ack
            await tool.started.wait()
            stopping = asyncio.create_task(daemon.stop(grace_s=0.2))
            res = json.loads(await ws.recv())
            assert res["op"] == "call_tool_res" and res["error"]["code"] == ErrorCode.CANCELLED
            assert "shutting down" in res["error"]["message"]
            with pytest.raises(ConnectionClosed) as info:
                await ws.recv()
            assert info.value.rcvd.code == 1001
            await stopping
    assert tool.cancelled == 1
