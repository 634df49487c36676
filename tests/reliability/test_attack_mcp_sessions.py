"""Attacks on MCP sessions at ``/mcp`` (2025-11-25 era), against a real ``exai serve``.

* **Another principal's session id**: Bob, holding each of Alice's session ids,
  tries a call, a GET stream and a DELETE in it (the attack run could do all
  three, and Alice's next request got 404): each must be 404, and Alice's
  sessions must still answer her afterwards.
* **A flood of sessions**: one token sends 2,000 ``initialize`` requests (each
  session held about 40 KiB for 30 minutes): only
  ``EXAI_MCP_MAX_SESSIONS_PER_PRINCIPAL`` are opened, the rest refused with 429,
  another principal still opens one, and the daemon's memory stays put.
* **Concurrent GET streams**: 100 GETs on one session written at once (82 of
  100 were accepted): one stream, 99 refusals with 409.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import httpx
import psutil
import pytest

from tests.reliability.harness import DaemonProcess, free_port, http_listening, scaled

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

ALICE, BOB = "mcp-alice-token-7c1e", "mcp-bob-token-2f9a"
ERA = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "attacker", "version": "1"}}}  # fmt: skip
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    process = DaemonProcess(tmp_path_factory.mktemp("mcp-sessions"),
                            EXAI_HTTP_PORT=str(free_port()),
                            EXAI_WS_TOKENS=f"alice={ALICE},bob={BOB}").start()  # fmt: skip
    http_listening(int(process.env["EXAI_HTTP_PORT"]))
    yield process
    process.stop()


def _url(daemon: DaemonProcess) -> str:
    return f"http://127.0.0.1:{daemon.env['EXAI_HTTP_PORT']}/mcp"


def _headers(token: str, session_id: str | None = None) -> dict[str, str]:
    out = {**ERA, "Authorization": f"Bearer {token}"}
    if session_id is not None:
        out |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    return out


async def _open(http: httpx.AsyncClient, url: str, token: str) -> str:
    opened = await http.post(url, json=INIT, headers=_headers(token))
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers=_headers(token, session_id))  # fmt: skip
    return session_id


async def _echo(http: httpx.AsyncClient, url: str, token: str, session_id: str,
                text: str) -> httpx.Response:  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}  # fmt: skip
    return await http.post(url, json=body, headers=_headers(token, session_id))


def _answer_text(response: httpx.Response) -> str | None:
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    try:
        return str(json.loads(data[-1])["result"]["content"][0]["text"])
    except (IndexError, KeyError, ValueError):
        return None


async def test_another_principals_session_ids_are_404_for_every_method(daemon, figures):
    url, sessions = _url(daemon), scaled(50, minimum=10)
    tally: Counter[str] = Counter()
    async with httpx.AsyncClient(timeout=30) as http:
        mine = [await _open(http, url, ALICE) for _ in range(sessions)]
        for session_id in mine:
            call = await _echo(http, url, BOB, session_id, "bob was here")
            tally[f"call_{call.status_code}"] += 1
            async with http.stream("GET", url, headers=_headers(BOB, session_id)) as stream:
                tally[f"stream_{stream.status_code}"] += 1
            delete = await http.delete(url, headers=_headers(BOB, session_id))
            tally[f"delete_{delete.status_code}"] += 1
        answered = 0
        for n, session_id in enumerate(mine):
            if _answer_text(await _echo(http, url, ALICE, session_id, f"mine {n}")) == f"mine {n}":
                answered += 1
        for session_id in mine:
            await http.delete(url, headers=_headers(ALICE, session_id))
    figures.record("mcp_sessions", hijack_sessions=sessions, hijack_tries=3 * sessions,
                   hijack_outcomes=dict(sorted(tally.items())),
                   hijack_owner_answered_after=answered)  # fmt: skip
    assert tally == Counter({"call_404": sessions, "stream_404": sessions,
                             "delete_404": sessions})  # fmt: skip
    assert answered == sessions


async def test_a_flood_of_initialize_from_one_token_opens_only_its_cap(daemon, figures):
    url, attempts, cap = _url(daemon), scaled(2000, minimum=200), 64
    process = psutil.Process(daemon.pid)
    rss_start = process.memory_info().rss
    tally: Counter[int] = Counter()
    opened: list[str] = []
    limits = httpx.Limits(max_connections=50)
    at_once = asyncio.Semaphore(50)  # no request waits on the client's pool
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:

        async def one() -> None:
            async with at_once:
                answer = await http.post(url, json=INIT, headers=_headers(ALICE))
            tally[answer.status_code] += 1
            if answer.status_code == 200:
                opened.append(answer.headers["mcp-session-id"])
            elif answer.status_code == 429:
                assert "EXAI_MCP_MAX_SESSIONS_PER_PRINCIPAL" in answer.json()["error"]["message"]

        await asyncio.gather(*(one() for _ in range(attempts)))
        rss_peak = process.memory_info().rss
        held = (await daemon.ametrics()).get("exai_mcp_sessions")
        bobs = await _open(http, url, BOB)
        for session_id in opened:
            await http.delete(url, headers=_headers(ALICE, session_id))
        await http.delete(url, headers=_headers(BOB, bobs))
        after = (await daemon.ametrics()).get("exai_mcp_sessions")
    figures.record("mcp_sessions", flood_attempts=attempts, flood_cap=cap,
                   flood_outcomes={str(k): v for k, v in sorted(tally.items())},
                   flood_sessions_held=held, flood_sessions_after_delete=after,
                   flood_rss_mib={"start": round(rss_start / MIB, 1),
                                  "peak": round(rss_peak / MIB, 1)})  # fmt: skip
    assert tally == Counter({200: cap, 429: attempts - cap})
    assert held == cap and after == 0
    assert rss_peak - rss_start < 40 * MIB


async def test_concurrent_get_streams_on_one_session_get_one(daemon, figures):
    url, rounds, port = _url(daemon), scaled(10, minimum=3), int(daemon.env["EXAI_HTTP_PORT"])
    tally: Counter[int] = Counter()
    per_round: list[int] = []
    async with httpx.AsyncClient(timeout=30) as http:
        session_id = await _open(http, url, ALICE)
        lines = "".join(f"{k}: {v}\r\n" for k, v in _headers(ALICE, session_id).items())
        request = f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{lines}\r\n".encode()
        for _ in range(rounds):
            streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(100)]
            for _, writer in streams:
                writer.write(request)
            heads = await asyncio.gather(*(r.readuntil(b"\r\n\r\n") for r, _ in streams))
            statuses = [int(head.split(b" ")[1]) for head in heads]
            tally.update(statuses)
            per_round.append(statuses.count(200))
            for _, writer in streams:
                writer.close()
            await asyncio.sleep(0.5)  # the stream's end reaches the daemon
        await http.delete(url, headers=_headers(ALICE, session_id))
    figures.record("mcp_sessions", streams_rounds=rounds, streams_tried=100 * rounds,
                   streams_outcomes={str(k): v for k, v in sorted(tally.items())},
                   streams_accepted_per_round=per_round)  # fmt: skip
    assert per_round == [1] * rounds
    assert tally == Counter({200: rounds, 409: 99 * rounds})
