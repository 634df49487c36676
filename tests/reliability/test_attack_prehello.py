"""Attacks before login, against a real ``exai serve`` with default settings.

The attacks of an independent attack run, repeated while a sampler records the
daemon's resident memory every 20 ms and a bystander keeps calling ``echo``:

* **slow big frames**: clients that never say hello send the header of a
  60 MiB frame and as much of its payload as the daemon will take, then stall
  (the attack took the daemon from 159 to 1,339 MB with 20 clients);
* **compression bombs** (``EXAI_WS_COMPRESSION=true``): rounds of clients each
  sending a 60 MiB hello deflated to ~60 KB, in one frame or as fragments that
  stall (4 rounds of 15 took it from 93 to 3,047 MB, never returned);
* **slow big upgrade requests**: clients sending a megabyte of headers slowly;
* **silent connections**: more connections from one address than
  ``EXAI_MAX_UNAUTHENTICATED_PER_IP``, each holding a hello-sized frame but one
  byte; the surplus is refused with HTTP 429, the rest cut off at the hello timeout;
* **a burst after login**: logged-in clients each send 30 MiB of a message in
  16 KiB fragments and vanish; that memory is theirs to use, but must come back;
* **guessing**: failed logins from one address as fast as 20 connections make
  them (about 1,000 a second were possible): how many tokens get checked.

For the attacks before login the daemon's RSS may grow by less than 100 MB, and
must come back within 8 MB of where it started once the clients have gone.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Frame, Opcode

from exai.client import ExaiClient, HelloRefused
from tests.reliability.harness import (
    Bystander,
    DaemonProcess,
    client_frame,
    open_raw_websocket,
    scaled,
    wait_until,
)

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - the pure-Python build of websockets
    from websockets.utils import apply_mask

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

TOKEN = "prehello-token-3f9a1c"
BYSTANDER_TOKEN = "prehello-bystander-7d2e"
MIB = 1024 * 1024
PEAK_GROWTH_MIB = 100.0  # what all the clients of one attack may add at once
SETTLED_MIB = 8.0  # where RSS must return to, above its start, once they have gone
HELLO_LIMIT = 16 * 1024  # EXAI_HELLO_MAX_BYTES's default
UNAUTHENTICATED_LIMIT = 256  # EXAI_MAX_UNAUTHENTICATED_PER_IP's default


# --- measuring ------------------------------------------------------------------------


class RssWatch:
    """The daemon's RSS sampled every 20 ms on a thread while the block runs."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self._process = psutil.Process(daemon.pid)
        self.start = self._process.memory_info().rss
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def _settled(daemon: DaemonProcess, start: int) -> float:
    """Wait for the attackers' connections to be gone and RSS to come back near
    ``start``; return RSS in MiB then."""
    await wait_until(
        lambda: daemon.metrics().get("exai_connections_unauthenticated", 0) == 0,
        60,
        "unauthenticated connections gone",
    )
    await asyncio.sleep(2.5)  # two heartbeats, on which the daemon hands memory back
    process = psutil.Process(daemon.pid)
    await wait_until(
        lambda: process.memory_info().rss <= start + SETTLED_MIB * MIB,
        30,
        f"RSS back within {SETTLED_MIB} MiB of its start",
    )
    return _mib(process.memory_info().rss)


def _mib(n: float) -> float:
    return round(n / MIB, 1)


def _record(figures, key: str, watch: RssWatch, after_mib: float, **extra: Any) -> None:
    figures.record(
        "prehello",
        **{
            f"{key}_rss_start_mib": _mib(watch.start),
            f"{key}_rss_peak_mib": _mib(watch.peak),
            f"{key}_rss_after_mib": after_mib,
            **{f"{key}_{k}": v for k, v in extra.items()},
        },
    )


async def _warm(daemon: DaemonProcess) -> None:
    """Serve a little first, so what is measured is the attack, not first use."""
    for _ in range(3):
        async with ExaiClient(daemon.url, TOKEN, ping_interval=None) as client:
            await asyncio.gather(*(client.call("echo", {"text": "w" * 1000}) for _ in range(20)))
    await asyncio.sleep(2.5)  # two heartbeats: whatever start-up freed is handed back


# --- the daemons ------------------------------------------------------------------------


def _daemon(workdir: Path, **env: str) -> DaemonProcess:
    return DaemonProcess(
        workdir,
        EXAI_WS_TOKENS=f"attacked={TOKEN},bystander={BYSTANDER_TOKEN}",
        **env,
    ).start()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    daemon = _daemon(tmp_path_factory.mktemp("prehello-plain"))
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def deflating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    daemon = _daemon(tmp_path_factory.mktemp("prehello-deflate"), EXAI_WS_COMPRESSION="true")
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def bystander(plain: DaemonProcess) -> Iterator[Bystander]:
    # 10 calls a second at most: well inside the default rate limit of 1,200 a minute.
    watcher = Bystander(plain.url, BYSTANDER_TOKEN, pause_s=0.1).start()
    yield watcher
    watcher.stop()


# --- wire helpers ---------------------------------------------------------------------


def _frame_header(opcode: int, length: int, *, fin: bool = True, rsv1: bool = False) -> bytes:
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode])
    if length < 126:
        return head + bytes([0x80 | length])
    if length < 65536:
        return head + bytes([0x80 | 126]) + length.to_bytes(2, "big")
    return head + bytes([0x80 | 127]) + length.to_bytes(8, "big")


def _masked(opcode: int, payload: bytes, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """A client frame built by hand, so it can carry already-deflated data (rsv1)."""
    mask = os.urandom(4)
    return (
        _frame_header(opcode, len(payload), fin=fin, rsv1=rsv1) + mask + apply_mask(payload, mask)
    )


async def _close_code(reader: asyncio.StreamReader, timeout_s: float) -> int | None:
    """The code of the daemon's close frame; None if it sent none in time."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                head = await reader.readexactly(2)
                length = head[1] & 0x7F
                if length == 126:
                    length = int.from_bytes(await reader.readexactly(2), "big")
                payload = await reader.readexactly(length)
                if head[0] & 0x0F == Opcode.CLOSE:
                    return int.from_bytes(payload[:2], "big")
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return None


async def _open_deflate_websocket(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n".encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 101") and b"permessage-deflate" in head, head[:300]
    return reader, writer


class _Deflater:
    """One permessage-deflate stream: each piece compressed and flushed, trailer cut."""

    def __init__(self) -> None:
        # A 512-byte window: inflatable whatever window the daemon negotiated.
        self._z = zlib.compressobj(9, zlib.DEFLATED, -9)

    def __call__(self, data: bytes) -> bytes:
        out = self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        assert out.endswith(b"\x00\x00\xff\xff")
        return out[:-4]


# --- slow big frames ------------------------------------------------------------------


async def _slow_big_frame(port: int, stall: asyncio.Event, tally: Counter[str]) -> None:
    reader, writer = await open_raw_websocket(port)
    size = 60 * MIB
    mask = os.urandom(4)
    writer.write(_frame_header(Opcode.TEXT, size) + mask)
    chunk = apply_mask(b"x" * MIB, mask)  # a multiple of 4 bytes: the mask lines up again
    sent = 0
    try:
        writer.write(chunk)
        await asyncio.wait_for(writer.drain(), 5)
        sent += MIB
    except (ConnectionError, TimeoutError):
        pass
    code = await _close_code(reader, 5)
    tally[f"close_{code}"] += 1
    try:
        for _ in range(58 if code is None else 0):  # the rest of 59 MiB, if it is still read
            writer.write(chunk)
            await asyncio.wait_for(writer.drain(), 5)
            sent += MIB
    except (ConnectionError, TimeoutError):
        pass
    tally["mib_sent"] += sent // MIB
    await stall.wait()
    writer.close()


async def test_slow_big_frames_before_hello(plain: DaemonProcess, bystander: Bystander, figures):
    clients = scaled(60, minimum=20)
    await _warm(plain)
    tally: Counter[str] = Counter()
    stall = asyncio.Event()
    with RssWatch(plain) as watch:
        attackers = [asyncio.create_task(_slow_big_frame(plain.port, stall, tally))
                     for _ in range(clients)]  # fmt: skip
        await wait_until(lambda: sum(v for k, v in tally.items() if k.startswith("close_"))
                         == clients, 60, "every attacker answered")  # fmt: skip
        await asyncio.sleep(1)  # stalled, holding whatever the daemon kept
        stall.set()
        await asyncio.gather(*attackers)
    after = await _settled(plain, watch.start)
    _record(figures, "slow_frames", watch, after, clients=clients,
            closes=dict(sorted((k, v) for k, v in tally.items() if k.startswith("close_"))),
            mib_the_clients_got_to_send=tally["mib_sent"])  # fmt: skip
    assert tally[f"close_{1009}"] == clients, tally
    assert watch.peak - watch.start < PEAK_GROWTH_MIB * MIB, _mib(watch.peak - watch.start)


# --- compression bombs ----------------------------------------------------------------

BOMB_HEAD = b'{"op":"hello","token":"'


@functools.cache
def _bombs() -> tuple[list[bytes], list[bytes]]:
    """The two bombs, deflated once: a 60 MiB hello in one frame, and 59 MiB of one
    as fragments (the last of which never comes). Every connection inflates with
    a fresh context, so the same bytes serve every client."""
    zeros = b"0" * MIB
    whole = _Deflater()(BOMB_HEAD + zeros * 60 + b'"}')
    deflate = _Deflater()
    pieces = [deflate(BOMB_HEAD + zeros)] + [deflate(zeros) for _ in range(58)]
    return [whole], pieces


async def _bomb(port: int, fragmented: bool, stall: asyncio.Event, tally: Counter[str]) -> None:
    reader, writer = await _open_deflate_websocket(port)
    whole, pieces = _bombs()
    if fragmented:
        frames = [_masked(Opcode.TEXT, pieces[0], fin=False, rsv1=True)]
        frames += [_masked(Opcode.CONT, piece, fin=False) for piece in pieces[1:]]
    else:
        frames = [_masked(Opcode.TEXT, whole[0], rsv1=True)]
    wire = sum(len(f) for f in frames)
    try:
        writer.write(b"".join(frames))
        await asyncio.wait_for(writer.drain(), 5)
    except (ConnectionError, TimeoutError):
        pass
    tally[f"close_{await _close_code(reader, 5)}"] += 1
    tally["wire_bytes"] += wire
    await stall.wait()
    writer.close()


async def test_compression_bombs_before_hello(deflating: DaemonProcess, figures):
    rounds, clients = 4, scaled(15, minimum=6)
    _bombs()  # deflated before the clock starts, not while connections wait
    await _warm(deflating)
    tally: Counter[str] = Counter()
    start = psutil.Process(deflating.pid).memory_info().rss
    peaks, afters = [], []
    for r in range(rounds):
        stall = asyncio.Event()
        with RssWatch(deflating) as watch:
            bombs = [asyncio.create_task(_bomb(deflating.port, i % 2 == 1, stall, tally))
                     for i in range(clients)]  # fmt: skip
            await wait_until(lambda r=r: sum(v for k, v in tally.items() if k.startswith("close_"))
                             == (r + 1) * clients, 60, "every bomb answered")  # fmt: skip
            await asyncio.sleep(1)
            stall.set()
            await asyncio.gather(*bombs)
        peaks.append(_mib(watch.peak))
        afters.append(await _settled(deflating, start))
    wire_kb = round(tally["wire_bytes"] / (rounds * clients) / 1024, 1)
    figures.record("prehello", bomb_rounds=rounds, bomb_clients_per_round=clients,
                   bomb_wire_kb_per_client=wire_kb, bomb_rss_start_mib=_mib(start),
                   bomb_rss_peak_mib_by_round=peaks, bomb_rss_after_mib_by_round=afters,
                   bomb_closes=dict(sorted((k, v) for k, v in tally.items()
                                           if k.startswith("close_"))))  # fmt: skip
    assert tally[f"close_{1009}"] == rounds * clients, tally
    assert max(peaks) - _mib(start) < PEAK_GROWTH_MIB, peaks


# --- slow big upgrade requests ------------------------------------------------------------


async def _slow_headers(port: int, tally: Counter[str]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
    sent = 0
    try:
        for i in range(127):  # up to websockets' own limits: 128 lines of 8 KiB
            writer.write(b"X-Filler-%d: %s\r\n" % (i, b"a" * 8000))
            await asyncio.wait_for(writer.drain(), 5)
            sent += 8000
            await asyncio.sleep(0.01)
        tally["finished_unhindered"] += 1
        await asyncio.wait_for(reader.read(), 15)
    except (ConnectionError, TimeoutError):
        pass
    tally["kib_sent"] += sent // 1024
    writer.close()


async def test_slow_big_upgrade_requests(plain: DaemonProcess, bystander: Bystander, figures):
    clients = scaled(200, minimum=50)
    await _warm(plain)
    tally: Counter[str] = Counter()
    with RssWatch(plain) as watch:
        await asyncio.gather(*(_slow_headers(plain.port, tally) for _ in range(clients)))
    after = await _settled(plain, watch.start)
    _record(figures, "slow_headers", watch, after, clients=clients,
            kib_sent_per_client=round(tally["kib_sent"] / clients, 1),
            clients_that_sent_it_all=tally["finished_unhindered"])  # fmt: skip
    assert tally["finished_unhindered"] == 0, tally
    assert watch.peak - watch.start < PEAK_GROWTH_MIB * MIB, _mib(watch.peak - watch.start)


# --- silent connections ---------------------------------------------------------------


async def _silent(port: int, tally: Counter[str]) -> None:
    try:
        reader, writer = await open_raw_websocket(port)
    except AssertionError as refused:  # the harness asserts on a status other than 101
        tally["429" if " 429 " in str(refused) else "other_refusal"] += 1
        return
    tally["upgraded"] += 1
    frame = client_frame(json.dumps({"op": "hello", "token": "t" * (HELLO_LIMIT - 40)}))
    writer.write(frame[:-1])  # all of a hello-sized frame but its last byte
    tally[f"close_{await _close_code(reader, 30)}"] += 1
    writer.close()


async def test_silent_connections_beyond_the_per_address_limit(
    plain: DaemonProcess, bystander: Bystander, figures
):
    clients = UNAUTHENTICATED_LIMIT + scaled(100, minimum=20)
    await _warm(plain)
    tally: Counter[str] = Counter()
    with RssWatch(plain) as watch:
        await asyncio.gather(*(_silent(plain.port, tally) for _ in range(clients)))
    after = await _settled(plain, watch.start)
    _record(figures, "silent", watch, after, clients=clients, upgraded=tally["upgraded"],
            refused_429=tally["429"], closes=dict(sorted((k, v) for k, v in tally.items()
                                                      if k.startswith("close_"))))  # fmt: skip
    assert tally["upgraded"] == UNAUTHENTICATED_LIMIT, tally
    assert tally["429"] == clients - UNAUTHENTICATED_LIMIT, tally
    assert tally[f"close_{4002}"] == UNAUTHENTICATED_LIMIT, tally  # the hello timeout
    assert watch.peak - watch.start < PEAK_GROWTH_MIB * MIB, _mib(watch.peak - watch.start)


# --- a burst after login ----------------------------------------------------------------


async def _logged_in_burst(port: int, everyone_sent: asyncio.Barrier) -> None:
    reader, writer = await open_raw_websocket(port)
    writer.write(client_frame(json.dumps({"op": "hello", "token": TOKEN})))
    await reader.readuntil(b'"ok":true')
    piece = b"x" * (16 * 1024)
    writer.write(Frame(Opcode.TEXT, piece, fin=False).serialize(mask=True))
    for i in range(30 * 64 - 1):  # 30 MiB in all
        writer.write(Frame(Opcode.CONT, piece, fin=False).serialize(mask=True))
        if i % 64 == 0:
            await writer.drain()
    await writer.drain()
    await everyone_sent.wait()  # so that all the bursts are in the daemon at once
    await asyncio.sleep(0.5)
    writer.transport.abort()


async def test_memory_of_a_burst_after_login_comes_back(plain: DaemonProcess, figures):
    clients = scaled(10, minimum=4)
    await _warm(plain)
    everyone_sent = asyncio.Barrier(clients)
    with RssWatch(plain) as watch:
        await asyncio.gather(*(_logged_in_burst(plain.port, everyone_sent) for _ in range(clients)))
    after = await _settled(plain, watch.start)
    _record(figures, "burst_after_login", watch, after, clients=clients)
    assert watch.peak - watch.start > clients * 20 * MIB  # it did hold the bursts meanwhile


# --- guessing ---------------------------------------------------------------------------


async def _guess(url: str, token: str, local: str = "127.0.0.1") -> str:
    """What the daemon says to one hello: its error code, or "ok"."""
    try:
        async with connect(url, open_timeout=10, local_addr=(local, 0)) as ws:
            await ws.send(json.dumps({"op": "hello", "token": token}))
            ack = json.loads(await ws.recv())
            return "ok" if ack["ok"] else str(ack["error"]["code"])
    except (ConnectionClosed, InvalidStatus, OSError) as exc:
        return type(exc).__name__


async def test_guessing_tokens_is_throttled(tmp_path: Path, figures):
    daemon = _daemon(tmp_path)
    try:
        duration_s = float(scaled(5, minimum=2))
        outcomes: Counter[str] = Counter()
        deadline = time.monotonic() + duration_s

        async def guesser(n: int) -> None:
            i = 0
            while time.monotonic() < deadline:
                outcomes[await _guess(daemon.url, f"guess-{n}-{i}")] += 1
                i += 1

        started = time.monotonic()
        await asyncio.gather(*(guesser(n) for n in range(20)))
        elapsed = time.monotonic() - started
        right_token_here = await _guess(daemon.url, TOKEN)
        right_token_elsewhere = await _guess(daemon.url, TOKEN, local="127.0.0.2")
        with pytest.raises(HelloRefused) as refused:
            async with ExaiClient(daemon.url, TOKEN, connect_attempts=1):
                pass
        problems = daemon.log_problems()
        throttled_lines = [
            r for r in daemon.log_records()
            if isinstance(r, dict) and r.get("event") == "failed logins throttled"
        ]  # fmt: skip
    finally:
        daemon.stop()
    attempts = sum(outcomes.values())
    checked = outcomes["UNAUTHORIZED"]
    figures.record("prehello", guess_seconds=round(elapsed, 1), guess_attempts=attempts,
                   guess_attempts_per_s=round(attempts / elapsed),
                   guess_tokens_checked=checked, guess_outcomes=dict(outcomes),
                   guess_right_token_same_address=right_token_here,
                   guess_right_token_other_address=right_token_elsewhere)  # fmt: skip
    # 30 at once, then 30 a minute (EXAI_AUTH_FAILURES_BURST, EXAI_AUTH_FAILURES_PER_MIN).
    assert checked <= 30 + elapsed / 2 + 1, outcomes
    assert outcomes["RATE_LIMITED"] == attempts - checked, outcomes
    assert right_token_here == "RATE_LIMITED" and right_token_elsewhere == "ok"
    assert refused.value.error is not None and refused.value.error.retry_after_s
    assert len(throttled_lines) == 1 and problems == [], problems[:3]


def test_no_error_lines_in_the_attacked_daemons_logs(
    plain: DaemonProcess, deflating: DaemonProcess, bystander: Bystander, figures
):
    report = bystander.stop()
    problems = plain.log_problems() + deflating.log_problems()
    figures.record(
        "prehello",
        bystander_calls=report.calls,
        bystander_failures=len(report.failures),
        error_log_lines=len(problems),
    )
    assert report.failures == [] and report.calls > 0, report.failures[:3]
    assert problems == [], problems[:3]
