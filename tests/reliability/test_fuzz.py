"""Protocol fuzzing against a live daemon process while a bystander keeps calling.

Generated frames (hypothesis) and a hand-written corpus of nasty ones go to one
``exai serve`` subprocess. Every frame must get its documented answer (see
:mod:`tests.reliability.fuzzing` for the oracle), the process must survive all of
it, nothing may be logged at error level, and a second client calling ``echo``
the whole time must never see an error or a wrong answer.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from exai.client import ExaiClient
from exai.protocol import ErrorCode, ErrorFrame, PongFrame, ProgressFrame, parse_server_frame
from exai.settings import Settings
from exai.tools.registry import ToolRegistry
from tests.reliability.fuzzing import (
    FuzzConnection,
    Handshaker,
    Pipeline,
    first_frames,
    payloads,
)
from tests.reliability.harness import (
    Bystander,
    DaemonProcess,
    client_frame,
    open_raw_websocket,
    scaled,
    wait_until,
)

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

FUZZ_TOKEN = "fuzzer-token-5d0c2f"
BYSTANDER_TOKEN = "bystander-token-81aa7e"
LIMIT = 64 * 1024  # EXAI_MAX_FRAME_BYTES: small, so oversized frames are cheap to send
HELLO_LIMIT = 16 * 1024  # EXAI_HELLO_MAX_BYTES: first frames beyond it close with 1009
TOOL_NAMES = ToolRegistry.from_entry_points(
    Settings(_env_file=None, tool_profile="full")  # type: ignore[call-arg]
).names()
TALLY: Counter[str] = Counter()


def _hypothesis(examples: int) -> settings:
    return settings(
        max_examples=scaled(examples),
        deadline=None,
        database=None,  # no .hypothesis directory in the checkout
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    workdir = tmp_path_factory.mktemp("fuzz")
    process = DaemonProcess(
        workdir,
        EXAI_WS_TOKENS=f"fuzzer={FUZZ_TOKEN},bystander={BYSTANDER_TOKEN}",
        EXAI_MAX_FRAME_BYTES=str(LIMIT),
        EXAI_HELLO_MAX_BYTES=str(HELLO_LIMIT),
        # Hundreds of wrong tokens from one address, each of which must get its own
        # UNAUTHORIZED: the failed-login throttle would answer most of them instead.
        EXAI_AUTH_FAILURES_PER_MIN="0",
        EXAI_DEFAULT_TIMEOUT_S="2",
        EXAI_MAX_TIMEOUT_S="10",
        EXAI_PROGRESS_INTERVAL_S="0.5",
        EXAI_RATE_LIMIT_PER_MIN="0",
        EXAI_HELLO_TIMEOUT_S="1",
        EXAI_TOOL_PROFILE="full",
        EXAI_AUDIT_ENABLED="true",
        EXAI_AUDIT_SINK="jsonl",
        EXAI_AUDIT_JSONL_PATH=str(workdir / "audit.jsonl"),
    ).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def bystander(daemon: DaemonProcess) -> Iterator[Bystander]:
    watcher = Bystander(daemon.url, BYSTANDER_TOKEN).start()
    yield watcher
    watcher.stop()


@pytest.fixture(scope="module")
def session(daemon: DaemonProcess, bystander: Bystander) -> Iterator[FuzzConnection]:
    conn = FuzzConnection(daemon.url, FUZZ_TOKEN, LIMIT, TALLY)
    conn.open()
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def handshaker(daemon: DaemonProcess, bystander: Bystander) -> Handshaker:
    return Handshaker(daemon.url, {FUZZ_TOKEN, BYSTANDER_TOKEN}, HELLO_LIMIT, TALLY)


# --- generated frames --------------------------------------------------------------------


@_hypothesis(4000)
@given(payload=payloads(TOOL_NAMES, [FUZZ_TOKEN], LIMIT))
def test_generated_frames_after_hello_get_their_documented_answer(
    session: FuzzConnection, payload: tuple[str | bytes, bool]
) -> None:
    TALLY["generated"] += 1
    session.exchange(*payload)


@_hypothesis(800)
@given(payload=first_frames(TOOL_NAMES, [FUZZ_TOKEN], LIMIT, HELLO_LIMIT))
def test_generated_first_frames_get_their_documented_close(
    handshaker: Handshaker, payload: tuple[str | bytes, bool]
) -> None:
    TALLY["generated"] += 1
    handshaker.exchange(*payload)


# --- the hand-written corpus ---------------------------------------------------------------


def _call(arguments: object, **extra: object) -> str:
    return json.dumps(
        {"op": "call_tool", "request_id": "corpus", "name": "echo", "arguments": arguments, **extra}
    )


CORPUS: list[tuple[str, str | bytes, bool]] = [
    # deep nesting
    ("arrays nested 32000 deep", "[" * 32000 + "]" * 32000, True),
    ("objects nested 10000 deep", '{"a":' * 10000 + "1" + "}" * 10000, True),
    (
        "arguments nested 10000 deep",
        '{"op":"call_tool","request_id":"n10k","name":"echo",'
        '"arguments":{"text":' + "[" * 10000 + "]" * 10000 + "}}",
        True,
    ),
    (
        "arguments nested 150 deep",
        '{"op":"call_tool","request_id":"n150","name":"echo",'
        '"arguments":{"text":' + "[" * 150 + "]" * 150 + "}}",
        True,
    ),
    ("hello nested client", json.dumps({"op": "hello", "client": {"name": [[[[["x"]]]]]}}), True),
    # huge strings and numbers
    ("echo text just under the limit", _call({"text": "\u00e9" * ((LIMIT - 200) // 2)}), True),
    ("request_id of 60000 chars", json.dumps({"op": "ping", "request_id": "r" * 60000}), True),
    (
        "tool name of 60000 chars",
        json.dumps({"op": "call_tool", "request_id": "n", "name": "n" * 60000}),
        True,
    ),
    ("integer of 60000 digits", '{"op":"ping","request_id":"big","x":' + "9" * 60000 + "}", True),
    ("float overflow", '{"op":"ping","request_id":"f","x":1e999999}', True),
    ("NaN timeout", '{"op":"call_tool","request_id":"nan","name":"echo","timeout_s":NaN}', True),
    (
        "Infinity timeout",
        '{"op":"call_tool","request_id":"inf","name":"echo","timeout_s":Infinity}',
        True,
    ),
    (
        "5000 keys",
        json.dumps({"op": "ping", "request_id": "k", **{f"k{i}": i for i in range(5000)}}),
        True,
    ),
    (
        "echo streamed in 1000 chunks",
        json.dumps(
            {
                "op": "call_tool",
                "request_id": "chunks",
                "name": "echo",
                "stream": True,
                "arguments": {"text": "ab" * 1000, "stream_chunks": 1000},
            }
        ),
        True,
    ),
    # wrong types, field by field
    ("op is a number", '{"op":1,"request_id":"t"}', True),
    ("op is null", '{"op":null}', True),
    ("op in capitals", '{"op":"PING","request_id":"t"}', True),
    ("name is a number", '{"op":"call_tool","request_id":"t","name":7}', True),
    ("arguments is a string", _call("text"), True),
    ("arguments is null", _call(None), True),
    ("arguments is a list", _call([1, 2]), True),
    ("timeout_s is a string", _call({}, timeout_s="10"), True),
    ("timeout_s is negative", _call({}, timeout_s=-1), True),
    ("timeout_s is zero", _call({}, timeout_s=0), True),
    ("timeout_s is tiny", _call({"delay_s": 0.5}, timeout_s=1e-9), True),
    ("deadline passes", _call({"delay_s": 1.5}, timeout_s=0.1), True),
    ("stream is a string", _call({}, stream="yes"), True),
    ("request_id is a list", '{"op":"ping","request_id":[]}', True),
    ("request_id is empty", '{"op":"list_tools","request_id":""}', True),
    ("request_id of 128 chars", json.dumps({"op": "ping", "request_id": "r" * 128}), True),
    ("request_id of 129 chars", json.dumps({"op": "ping", "request_id": "r" * 129}), True),
    ("echo text is a number", _call({"text": 5}), True),
    ("echo delay_s too big", _call({"delay_s": 1e9}), True),
    ("echo unknown argument", _call({"rm": "-rf /"}), True),
    ("cancel of an unknown id", '{"op":"cancel","request_id":"never"}', True),
    ("cancel without id", '{"op":"cancel"}', True),
    ("hello again", json.dumps({"op": "hello", "token": FUZZ_TOKEN}), True),
    ("unknown tool", json.dumps({"op": "call_tool", "request_id": "u", "name": "rm -rf"}), True),
    # not JSON objects, odd JSON
    ("empty text frame", "", True),
    ("whitespace", "   \n\t ", True),
    ("a JSON string", '"ping"', True),
    ("a JSON array of frames", '[{"op":"ping"}]', True),
    ("trailing garbage", '{"op":"ping"} {"op":"ping"}', True),
    ("duplicate op keys", '{"op":"ping","op":"call_tool","request_id":"d"}', True),
    ("single quotes", "{'op':'ping'}", True),
    ("JSON with comments", '{"op":"ping" /* hi */}', True),
    # unicode
    ("byte order mark", "\ufeff" + '{"op":"ping","request_id":"bom"}', True),
    ("NUL in a string", '{"op":"ping","request_id":"a\\u0000b"}', True),
    ("raw NUL in a string", '{"op":"ping","request_id":"a\x00b"}', True),
    ("lone high surrogate escape", '{"op":"ping","request_id":"\\ud800"}', True),
    ("lone low surrogate escape", '{"op":"ping","request_id":"\\udfff"}', True),
    (
        "right-to-left override and emoji",
        json.dumps(
            {
                "op": "call_tool",
                "request_id": "\u202e\U0001f600",
                "name": "echo",
                "arguments": {"text": "\u202e\U0001f600"},
            },
            ensure_ascii=False,
        ),
        True,
    ),
    ("invalid UTF-8 in a text frame", b'{"op":"ping","request_id":"\xff\xfe"}', True),
    ("overlong UTF-8 slash", b'{"op":"ping","request_id":"\xc0\xaf"}', True),
    ("CESU-8 surrogate bytes", b'{"op":"ping","request_id":"\xed\xa0\x80"}', True),
    ("UTF-16 JSON in a text frame", '{"op":"ping"}'.encode("utf-16"), True),
    # binary frames
    ("empty binary frame", b"", False),
    ("JSON in a binary frame", b'{"op":"ping","request_id":"b"}', False),
    ("random binary frame", bytes(range(256)) * 4, False),
    # oversized frames
    ("one byte over the limit", "x" * (LIMIT + 1), True),
    ("just under twice the limit", "x" * (2 * LIMIT), True),
    ("over twice the limit", "x" * (2 * LIMIT + 1), True),
    ("binary over twice the limit", b"x" * (2 * LIMIT + 1), False),
]


@pytest.mark.parametrize(("data", "text"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_corpus_frame_gets_its_documented_answer(
    session: FuzzConnection, data: str | bytes, text: bool
) -> None:
    TALLY["corpus"] += 1
    session.exchange(data, text)


def test_flood_of_small_frames_is_answered_in_order(
    daemon: DaemonProcess, bystander: Bystander
) -> None:
    n = scaled(20000, minimum=100)
    frames = []
    for i in range(n):
        frames.append(json.dumps({"op": "ping", "request_id": f"p{i}"}) if i % 2 else "garbage")
    with connect(daemon.url, max_size=None) as ws:
        ws.send(json.dumps({"op": "hello", "token": FUZZ_TOKEN}))
        assert parse_server_frame(ws.recv(timeout=10)).ok
        for frame in frames:
            ws.send(frame)
        replies = [parse_server_frame(ws.recv(timeout=30)) for _ in range(n)]
    for i, reply in enumerate(replies):
        if i % 2:
            assert isinstance(reply, PongFrame) and reply.request_id == f"p{i}", reply
        else:
            assert isinstance(reply, ErrorFrame), reply
            assert reply.error.code == ErrorCode.INVALID_REQUEST
    TALLY["flood"] += n
    TALLY["frames"] += n


def test_pipelined_calls_cancels_and_retries_get_one_result_each_and_last(
    daemon: DaemonProcess, bystander: Bystander
) -> None:
    """Hundreds of calls in flight on one connection, some cancelled (even before their
    task has started), some sent twice, some streaming: each call gets exactly one
    result and nothing for a call ever follows its result. A call sent again after it
    finished is answered again, from the replay cache (or run anew if it never ran)."""
    rng = random.Random(8)
    with connect(daemon.url, max_size=None) as ws:
        ws.send(json.dumps({"op": "hello", "token": FUZZ_TOKEN}))
        assert parse_server_frame(ws.recv(timeout=10)).ok
        for r in range(scaled(10, minimum=2)):
            pipeline = Pipeline([f"p{r}-{i}" for i in range(200)])
            TALLY["frames"] += pipeline.send(ws, rng)
            pipeline.collect(ws)
            TALLY["pipelined_calls"] += pipeline.answered
            TALLY["pipelined_cancelled"] += pipeline.cancelled


async def test_flood_from_a_client_that_never_reads_holds_up_nobody(
    daemon: DaemonProcess, bystander: Bystander
) -> None:
    calls_before = bystander.report.calls
    connections_before = daemon.metrics()["exai_connections"]
    # A watcher with a long call of its own, counting the daemon's heartbeats.
    watcher = ExaiClient(daemon.url, BYSTANDER_TOKEN)
    await watcher.connect()
    beats: list[ProgressFrame] = []
    long_call = asyncio.create_task(
        watcher.call("echo", {"text": "w", "delay_s": 8}, timeout_s=10, on_progress=beats.append)
    )
    # The flooder starts a long call too, then pings without ever reading the pongs,
    # until the daemon's sends to it back up and the daemon stops reading it.
    _, writer = await open_raw_websocket(daemon.port)
    writer.write(client_frame(json.dumps({"op": "hello", "token": FUZZ_TOKEN})))
    writer.write(
        client_frame(
            json.dumps(
                {
                    "op": "call_tool",
                    "request_id": "stuck",
                    "name": "echo",
                    "timeout_s": 10,
                    "arguments": {"text": "s", "delay_s": 8},
                }
            )
        )
    )
    pings = client_frame(json.dumps({"op": "ping", "request_id": "f" * 128})) * 100
    sent = 0
    try:
        while sent < 1_000_000:
            writer.write(pings)
            sent += 100
            await asyncio.wait_for(writer.drain(), timeout=2)
    except TimeoutError:
        pass
    TALLY["unread_flood"] += sent
    TALLY["frames"] += sent + 2
    # Everyone else is still served while this connection is stuck: calls, and the
    # heartbeats of long calls (one stuck send once held up the heartbeat for all).
    seen = len(beats)
    await wait_until(lambda: len(beats) >= seen + 3, 6, "heartbeats for the watcher")
    await wait_until(lambda: bystander.report.calls > calls_before + 20, 30, "bystander calls")
    assert (await long_call).error is None
    await watcher.close()
    writer.transport.abort()
    # ...and the stuck connection goes away when the client does.
    await wait_until(
        lambda: daemon.metrics()["exai_connections"] <= connections_before,
        30,
        "the stuck connection closed",
    )


def test_silent_client_is_closed_with_4002(daemon: DaemonProcess) -> None:
    with connect(daemon.url) as ws:
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=15)
    assert info.value.rcvd is not None and info.value.rcvd.code == 4002
    TALLY["close_4002"] += 1


def test_daemon_survived_everything_and_the_bystander_saw_no_error(
    daemon: DaemonProcess, bystander: Bystander, figures
) -> None:
    assert daemon.alive() and daemon.starts == 1, "the daemon died or was restarted"
    report = bystander.stop()
    assert report.failures == [], report.failures[:5]
    assert report.calls > 0
    problems = daemon.log_problems()
    assert problems == [], problems[:5]
    status, _ = daemon.http("/health")
    assert status == 200
    metrics = daemon.metrics()
    rejected = sum(v for k, v in metrics.items() if k.startswith("exai_frames_rejected_total"))
    closes = {k: v for k, v in sorted(TALLY.items()) if k.startswith("close_")}
    figures.record(
        "fuzz",
        frames_tried=TALLY["frames"] + TALLY["first_frames"],
        generated_frames=TALLY["generated"],
        corpus_frames=TALLY["corpus"],
        flood_frames=TALLY["flood"] + TALLY["unread_flood"],
        pipelined_calls=TALLY["pipelined_calls"],
        pipelined_cancelled=TALLY["pipelined_cancelled"],
        first_frames=TALLY["first_frames"],
        error_frames=TALLY["error_frames"],
        closes=closes,
        calls_answered=sum(v for k, v in TALLY.items() if k.startswith("call_")),
        call_outcomes={k[5:]: v for k, v in sorted(TALLY.items()) if k.startswith("call_")},
        replays=TALLY["replays"],
        daemon_frames_rejected=int(rejected),
        bystander_calls=report.calls,
        bystander_errors=len(report.failures),
        daemon_restarts=daemon.starts - 1,
        error_log_lines=len(problems),
    )
    Path(daemon.workdir / "tally.json").write_text(json.dumps(TALLY, indent=1))
