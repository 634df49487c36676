"""The HTTP listener's limits, over raw sockets: connection caps, the not-logged-in
allowance shared with the WebSocket face, and header and body read timeouts.

These also hold the seam with uvicorn (exai.web.listener overrides its httptools
protocol's parser callbacks): if a uvicorn release changes them, these fail.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from tests.web.helpers import MODERN, TOKEN, mcp_daemon, mcp_url, tools_call


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def _closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """Everything the daemon sent until it closed the connection."""
    return await asyncio.wait_for(reader.read(), timeout_s)


async def test_connections_that_never_finish_their_headers_are_closed_with_408(tmp_path: Path):
    async with mcp_daemon(tmp_path, http_header_timeout_s=1.0) as daemon:
        port = daemon.web.port
        slow = [await _open(port) for _ in range(20)]
        silent = await _open(port)
        started = time.monotonic()

        async def dribble(writer: asyncio.StreamWriter) -> None:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            for n in range(40):  # a header line every 0.3 s, never the blank line
                await asyncio.sleep(0.3)
                if writer.is_closing():
                    return
                writer.write(f"X-Slow-{n}: 1\r\n".encode())

        dribblers = [asyncio.create_task(dribble(w)) for _, w in slow]
        answers = await asyncio.gather(*(_closed_within(r, 10) for r, _ in [*slow, silent]))
        elapsed = time.monotonic() - started
        for task in dribblers:
            task.cancel()
        stats = daemon.web.connections
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[0][:200]
    assert b"EXAI_HTTP_HEADER_TIMEOUT_S" in answers[0]
    assert elapsed < 10  # closed by the timeout, not by the test's own deadline
    assert stats.timed_out["headers"] == 21


async def test_a_body_that_stops_coming_is_cut_off(tmp_path: Path):
    async with mcp_daemon(tmp_path, http_body_timeout_s=1.0) as daemon:
        reader, writer = await _open(daemon.web.port)
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                "Accept: application/json, text/event-stream\r\n"
                "Content-Length: 1000\r\n\r\n")  # fmt: skip
        writer.write(head.encode() + b'{"jsonrpc": "2.0", ')
        answer = await _closed_within(reader, 10)
        assert daemon.web.connections.timed_out["body"] == 1
    assert b" 200 " not in answer


async def test_a_keep_alive_client_may_pause_between_requests(tmp_path: Path):
    async with (
        mcp_daemon(tmp_path, http_header_timeout_s=0.5) as daemon,
        httpx.AsyncClient(headers={**MODERN, "Authorization": f"Bearer {TOKEN}"}) as http,
    ):
        first = await http.post(mcp_url(daemon), json=tools_call(text="one"))
        await asyncio.sleep(1.2)  # longer than the header timeout, shorter than keep-alive
        second = await http.post(mcp_url(daemon), json=tools_call(text="two"))
        assert daemon.web.connections.timed_out["headers"] == 0
    assert (first.status_code, second.status_code) == (200, 200)


async def test_an_address_may_hold_only_so_many_connections(tmp_path: Path):
    async with mcp_daemon(tmp_path, max_connections_per_ip=5) as daemon:
        port = daemon.web.port
        held = [await _open(port) for _ in range(5)]
        reader, _ = await _open(port)
        refused = await _closed_within(reader, 10)
        for _, writer in held:
            writer.close()
    assert refused.startswith(b"HTTP/1.1 503 ")
    assert b"too many HTTP connections from 127.0.0.1 (5)" in refused


async def test_connections_not_logged_in_share_the_websocket_faces_allowance(tmp_path: Path):
    async with mcp_daemon(tmp_path, max_unauthenticated_per_ip=3) as daemon:
        port = daemon.web.port
        # Two WebSocket connections that have not said hello, and one silent HTTP one...
        sockets = [await connect(daemon.url) for _ in range(2)]
        silent = await _open(port)
        # ...use the address's allowance: the next HTTP connection is refused.
        reader, _ = await _open(port)
        refused = await _closed_within(reader, 10)
        # A connection that logs in leaves the allowance, and so makes room.
        for ws in sockets:
            await ws.close()
        async with httpx.AsyncClient() as http:
            headers = {**MODERN, "Authorization": f"Bearer {TOKEN}"}
            answered = [
                await http.post(mcp_url(daemon), json=tools_call(), headers=headers)
                for _ in range(3)
            ]
            free = daemon.core.admission.unauthenticated
        silent[1].close()
    assert refused.startswith(b"HTTP/1.1 429 ")
    assert b"have not said hello (3)" in refused
    assert [a.status_code for a in answered] == [200, 200, 200]
    assert free == 1  # the silent HTTP connection; httpx's logged in


async def _absorbs_writes(writer: asyncio.StreamWriter, n: int = 5) -> bool:
    """Whether the daemon still reads (and drops) what the client sends: a closed
    socket answers the first write with a reset, and the next one fails."""
    try:
        for i in range(n):
            writer.write(f"X-After-{i}: 1\r\n".encode())
            await writer.drain()
            await asyncio.sleep(0.05)
    except ConnectionError:
        return False
    return not writer.is_closing()


async def test_a_408_is_a_lingering_close_so_a_client_still_sending_reads_it(tmp_path: Path):
    # Closing a socket with unread bytes in it sends a reset, which can reach the
    # client before it has read the 408; so the daemon half-closes, drops what
    # still comes, and closes when the client does.
    async with mcp_daemon(tmp_path, http_header_timeout_s=0.5) as daemon:
        reader, writer = await _open(daemon.web.port)
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = await _closed_within(reader, 10)  # the 408, then the daemon's FIN
        absorbed = await _absorbs_writes(writer)
        writer.write_eof()  # the client's FIN ends the linger
        for _ in range(100):
            if daemon.web.limits.lingering == 0 and len(daemon.web.connections) == 0:
                break
            await asyncio.sleep(0.02)
        left = (daemon.web.limits.lingering, len(daemon.web.connections))
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert absorbed
    assert left == (0, 0)


async def test_a_refusal_lingers_too_and_a_silent_client_is_closed_after_the_linger(
    tmp_path: Path,
):
    async with mcp_daemon(tmp_path, max_connections_per_ip=1) as daemon:
        held = await _open(daemon.web.port)
        reader, writer = await _open(daemon.web.port)
        refused = await _closed_within(reader, 10)
        absorbed = await _absorbs_writes(writer, n=2)
        # The client now says nothing and never closes: the daemon closes after LINGER_S.
        started = time.monotonic()
        for _ in range(200):
            if daemon.web.limits.lingering == 0:
                break
            await asyncio.sleep(0.05)
        lingered = time.monotonic() - started
        held[1].close()
        writer.close()
    assert refused.startswith(b"HTTP/1.1 503 ")
    assert absorbed
    assert daemon.web.limits.lingering == 0
    assert lingered < 10  # closed by the daemon, not by the test's deadline


async def test_no_more_refusals_linger_at_once_than_the_cap_on_all_connections(tmp_path: Path):
    # Refused connections do not count against the caps, so lingering ones are
    # capped themselves: a flood of refusals cannot hold an unbounded number open.
    async with mcp_daemon(tmp_path, max_connections=1) as daemon:
        held = await _open(daemon.web.port)
        first, second = await _open(daemon.web.port), await _open(daemon.web.port)
        answers = [await _closed_within(reader, 10) for reader, _ in (first, second)]
        lingering = daemon.web.limits.lingering
        absorbed = [await _absorbs_writes(writer, n=3) for _, writer in (first, second)]
        for _, writer in (held, first, second):
            writer.close()
    assert all(a.startswith(b"HTTP/1.1 503 ") for a in answers)
    assert lingering == 1
    assert absorbed == [True, False]
