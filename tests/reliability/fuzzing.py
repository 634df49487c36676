"""The protocol fuzzer: frame generators and the oracle that says what each frame must get.

The oracle is docs/protocol.md applied to one frame at a time:

* after ``hello``: a frame over twice ``max_frame_bytes`` closes with 1009; a binary
  frame gets an ``error`` frame; a text frame that is not UTF-8 closes with 1007;
  one over ``max_frame_bytes`` gets an ``error`` frame; one that the protocol module
  cannot accept gets an ``error`` frame carrying its readable ``request_id``;
  ``ping`` gets ``pong``, ``list_tools`` gets ``list_tools_res``, ``cancel`` of an id
  never used gets an ``error`` frame, and ``call_tool`` gets exactly one
  ``call_tool_res`` (after any ack, progress and chunks), replayed unchanged when
  its id already ran; ``INTERNAL_ERROR`` is never acceptable;
* as the first frame: 4000 for binary or non-JSON, 4001 for anything but a valid
  ``hello`` of protocol 1, 4003 for a wrong or missing token (both 4001 for a
  malformed ``hello`` and 4003 may be preceded by ``hello_ack`` with ``ok: false``).

Whether a frame is *valid* is decided by :func:`exai.protocol.parse_client_frame`,
the contract's own parser; what is tested is the daemon's answer to it and that
the daemon survives. Frames are exchanged one at a time, each followed by a
sentinel ``ping``: everything that arrives before the sentinel's ``pong`` (and,
for a call, until its result) must be exactly what the oracle expects.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from exai.protocol import (
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    FrameError,
    HelloAck,
    HelloFrame,
    ListToolsFrame,
    ListToolsResult,
    PingFrame,
    PongFrame,
    ProgressFrame,
    StreamChunk,
    parse_client_frame,
    parse_server_frame,
)

__all__ = ["FuzzConnection", "Handshaker", "Pipeline", "first_frames", "payloads"]

Payload = tuple[str | bytes, bool]  # (data, sent as a text frame)

RECV_TIMEOUT_S = 20.0
_SENTINEL = "\u2603sentinel-"


# --- the oracle -----------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    kind: str  # "close", "error", "pong", "list_tools", "cancel", "call"
    close: int | None = None
    request_id: str | None = None
    contains: str | None = None


def expect_after_hello(data: str | bytes, text: bool, limit: int) -> Expect:
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > 2 * limit:
        return Expect("close", close=1009)
    if not text:
        return Expect("error", contains="binary frames")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Expect("close", close=1007)
    if len(raw) > limit:
        return Expect("error", contains="max_frame_bytes")
    try:
        frame = parse_client_frame(decoded)
    except FrameError as exc:
        return Expect("error", request_id=exc.request_id)
    if isinstance(frame, HelloFrame):
        return Expect("error", contains="already received")
    if isinstance(frame, PingFrame):
        return Expect("pong", request_id=frame.request_id)
    if isinstance(frame, ListToolsFrame):
        return Expect("list_tools", request_id=frame.request_id)
    if isinstance(frame, CancelFrame):
        return Expect("cancel", request_id=frame.request_id)
    assert isinstance(frame, CallToolFrame)
    return Expect("call", request_id=frame.request_id)


def expect_first(data: str | bytes, text: bool, max_first: int, tokens: set[str]) -> Expect:
    """The close code a first frame must get, or ``kind="ok"`` for a good hello.

    ``max_first`` is the largest frame the daemon reads before a hello has
    succeeded (``EXAI_HELLO_MAX_BYTES``, or twice the frame limit if that is less).
    """
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > max_first:
        return Expect("close", close=1009)
    if not text:
        return Expect("close", close=4000)
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Expect("close", close=1007)
    try:
        frame = parse_client_frame(decoded)
    except FrameError as exc:
        return Expect("close", close=4000 if exc.not_json else 4001)
    if not isinstance(frame, HelloFrame):
        return Expect("close", close=4001)
    if frame.protocol is not None and frame.protocol != 1:
        return Expect("close", close=4001)
    if frame.token not in tokens:
        return Expect("close", close=4003)
    return Expect("ok")


# --- connections ------------------------------------------------------------------------


def _open(url: str) -> ClientConnection:
    return connect(url, max_size=None, compression=None, open_timeout=10, close_timeout=5)


def _send(ws: ClientConnection, data: str | bytes, text: bool) -> None:
    try:
        ws.send(data, text=text)
    except (ConnectionClosed, OSError):
        pass  # the daemon may close while a big frame is still being written


def _close_code(ws: ClientConnection) -> int | None:
    """Read until the daemon closes; return the code it sent."""
    try:
        while True:
            ws.recv(timeout=RECV_TIMEOUT_S)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None
    except TimeoutError:
        raise AssertionError("the daemon neither answered nor closed") from None


class FuzzConnection:
    """A session that has said ``hello``, fed one fuzz frame at a time."""

    def __init__(self, url: str, token: str, limit: int, tally: Counter[str]) -> None:
        self.url = url
        self.token = token
        self.limit = limit
        self.tally = tally
        self.results: dict[str, list[CallToolResult]] = {}  # request_id -> results, in order
        self.ws: ClientConnection | None = None
        self._n = 0

    def open(self) -> None:
        if self.ws is not None:
            self.ws.close()
        self.ws = _open(self.url)
        self.ws.send(json.dumps({"op": "hello", "token": self.token, "protocol": 1}))
        ack = parse_server_frame(self.ws.recv(timeout=RECV_TIMEOUT_S))
        assert isinstance(ack, HelloAck) and ack.ok, ack
        self.results.clear()  # a new session: nothing to replay

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def exchange(self, data: str | bytes, text: bool) -> None:
        """Send one frame and check everything the daemon answers to it."""
        if self.ws is None:
            self.open()
        try:
            self._exchange(data, text)
        except BaseException:
            self.open()  # unread frames must not leak into the next example
            raise

    def _exchange(self, data: str | bytes, text: bool) -> None:
        ws = self.ws
        assert ws is not None
        expect = expect_after_hello(data, text, self.limit)
        self.tally["frames"] += 1
        _send(ws, data, text)
        if expect.kind == "close":
            code = _close_code(ws)
            assert code == expect.close, f"expected close {expect.close}, got {code}"
            self.tally[f"close_{code}"] += 1
            self.open()
            return
        self._n += 1
        sentinel = f"{_SENTINEL}{self._n}"
        ws.send(json.dumps({"op": "ping", "request_id": sentinel}))
        frames: list[Any] = []
        call_result: CallToolResult | None = None
        while True:
            frame = self._recv()
            if isinstance(frame, PongFrame) and frame.request_id == sentinel:
                break
            frames.append(frame)
        if expect.kind == "call":
            call_result = next((f for f in frames if isinstance(f, CallToolResult)), None)
            while call_result is None:
                frame = self._recv()
                frames.append(frame)
                if isinstance(frame, CallToolResult):
                    call_result = frame
        self._check(expect, frames)

    def _recv(self) -> Any:
        assert self.ws is not None
        try:
            raw = self.ws.recv(timeout=RECV_TIMEOUT_S)
        except TimeoutError:
            raise AssertionError("no answer from the daemon") from None
        try:
            return parse_server_frame(raw)
        except FrameError as exc:
            raise AssertionError(f"the daemon sent a frame outside the contract: {raw!r}") from exc

    def _check(self, expect: Expect, frames: list[Any]) -> None:
        rid = expect.request_id
        if expect.kind == "error":
            self._one_error(frames, rid, expect.contains)
        elif expect.kind == "pong":
            assert [type(f) for f in frames] == [PongFrame], frames
            assert frames[0].request_id == rid
            self.tally["pongs"] += 1
        elif expect.kind == "list_tools":
            assert [type(f) for f in frames] == [ListToolsResult], frames
            assert frames[0].request_id == rid and frames[0].tools
            self.tally["list_tools"] += 1
        elif expect.kind == "cancel":
            if rid in self.results and not frames:
                self.tally["cancels_of_finished_calls"] += 1
            else:
                self._one_error(frames, rid, "no call")
        else:
            self._check_call(frames, rid)

    def _one_error(self, frames: list[Any], rid: str | None, contains: str | None) -> None:
        assert len(frames) == 1 and isinstance(frames[0], ErrorFrame), frames
        error = frames[0]
        assert error.error.code == ErrorCode.INVALID_REQUEST, error
        assert error.request_id == rid, (error.request_id, rid)
        if contains is not None:
            assert contains in error.error.message, error
        self.tally["error_frames"] += 1

    def _check_call(self, frames: list[Any], rid: str | None) -> None:
        assert rid is not None
        mine = [f for f in frames if getattr(f, "request_id", None) == rid]
        assert len(mine) == len(frames), f"frames for other requests: {frames}"
        *before, result = mine
        assert isinstance(result, CallToolResult), mine
        assert all(isinstance(f, CallToolAck | ProgressFrame | StreamChunk) for f in before), mine
        assert sum(isinstance(f, CallToolAck) for f in before) <= 1, mine
        seqs = [f.seq for f in before if isinstance(f, StreamChunk)]
        assert seqs == list(range(len(seqs))), seqs
        if result.error is not None:
            assert result.error.code != ErrorCode.INTERNAL_ERROR, result.error
            self.tally[f"call_{result.error.code.value}"] += 1
        else:
            self.tally["call_ok"] += 1
        if result.metadata.replayed:
            earlier = [(r.outputs, r.error and r.error.code) for r in self.results.get(rid, [])]
            assert (result.outputs, result.error and result.error.code) in earlier, (
                f"replayed something this session never answered: {result}"
            )
            self.tally["replays"] += 1
        else:
            self.results.setdefault(rid, []).append(result)


class Handshaker:
    """Opens a fresh connection per first frame and checks how the daemon ends it."""

    def __init__(self, url: str, tokens: set[str], max_first: int, tally: Counter[str]) -> None:
        self.url = url
        self.tokens = tokens
        self.max_first = max_first
        self.tally = tally

    def exchange(self, data: str | bytes, text: bool) -> None:
        expect = expect_first(data, text, self.max_first, self.tokens)
        self.tally["first_frames"] += 1
        ws = _open(self.url)
        try:
            _send(ws, data, text)
            if expect.kind == "ok":
                ack = parse_server_frame(ws.recv(timeout=RECV_TIMEOUT_S))
                assert isinstance(ack, HelloAck) and ack.ok, ack
                self.tally["hello_ok"] += 1
                return
            acks: list[Any] = []
            try:
                while True:
                    acks.append(parse_server_frame(ws.recv(timeout=RECV_TIMEOUT_S)))
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
            except TimeoutError:
                raise AssertionError("the daemon neither answered nor closed") from None
            assert code == expect.close, f"expected close {expect.close}, got {code} after {acks}"
            assert all(isinstance(a, HelloAck) and not a.ok for a in acks), acks
            if code == 4003:
                assert len(acks) == 1 and acks[0].error.code == ErrorCode.UNAUTHORIZED, acks
            self.tally[f"close_{code}"] += 1
        finally:
            ws.close()


class Pipeline:
    """Calls pipelined on one connection without waiting, with cancels and retries
    mixed in, and the check that each gets one result and nothing after it."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.retried: set[str] = set()
        self.results: dict[str, list[CallToolResult]] = {}

    def send(self, ws: ClientConnection, rng: random.Random) -> int:
        """Send every call (and the odd retry and cancel); return how many frames."""
        sent = 0
        for rid in self.ids:
            stream = rng.random() < 0.3
            arguments = {"text": rid * 3, "delay_s": rng.choice([0, 0.01, 0.05]),
                         "stream_chunks": 3 if stream else 0}  # fmt: skip
            ws.send(_call(rid, arguments, stream=stream))
            sent += 1
            if rng.random() < 0.1:  # a retry (the same call again), maybe while it runs
                ws.send(_call(rid, arguments, stream=stream))
                self.retried.add(rid)
                sent += 1
            if rng.random() < 0.2:  # maybe before the call it names was even sent
                ws.send(json.dumps({"op": "cancel", "request_id": rng.choice(self.ids)}))
                sent += 1
        return sent

    def collect(self, ws: ClientConnection, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.results) < len(self.ids):
            missing = set(self.ids) - set(self.results)
            assert time.monotonic() < deadline, f"never answered: {sorted(missing)[:10]}"
            self._take(parse_server_frame(ws.recv(timeout=RECV_TIMEOUT_S)))
        ws.send(json.dumps({"op": "ping", "request_id": "end"}))
        while (frame := parse_server_frame(ws.recv(timeout=RECV_TIMEOUT_S))).op != "pong":
            self._take(frame)
        for rid, answers in self.results.items():
            assert len(answers) == 1 or (rid in self.retried and len(answers) == 2), answers

    @property
    def answered(self) -> int:
        return sum(len(a) for a in self.results.values())

    @property
    def cancelled(self) -> int:
        return sum(1 for a in self.results.values() for r in a if r.error is not None)

    def _take(self, frame: Any) -> None:
        if isinstance(frame, ErrorFrame):  # a cancel of a call not sent yet, or long done
            assert "no call" in frame.error.message, frame
            return
        rid = frame.request_id
        if rid in self.results:  # after a result, only a retry's own answer may come
            assert rid in self.retried and not isinstance(frame, ProgressFrame), (rid, frame)
        if not isinstance(frame, CallToolResult):
            return
        assert frame.error is None or frame.error.code == ErrorCode.CANCELLED, frame
        if frame.error is None:
            assert frame.outputs[0].text == rid * 3, frame
        self.results.setdefault(rid, []).append(frame)


def _call(rid: str, arguments: dict[str, Any], stream: bool = False) -> str:
    return json.dumps({"op": "call_tool", "request_id": rid, "name": "echo", "stream": stream,
                       "arguments": arguments})  # fmt: skip


# --- generators -----------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_wrong_numbers = st.sampled_from([-1, 0, "1", None, [], {}, 1e308, -1e-9, True])


def frame_objects(tool_names: list[str], tokens: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects shaped like frames of every op, with wrong types mixed in."""
    request_ids = (
        st.sampled_from(["r1", "r2", "r3", "", "x" * 128, "x" * 129])
        | st.text(max_size=140)
        | json_values
    )
    names = (
        st.sampled_from([*tool_names, "nope", "", "ECHO", "echo ", "../echo"])
        | st.text(max_size=140)
        | json_values
    )
    echo_args = st.fixed_dictionaries(
        {},
        optional={
            "text": st.text(max_size=300) | json_values,
            "delay_s": st.floats(min_value=0, max_value=0.02) | _wrong_numbers,
            "stream_chunks": st.integers(min_value=0, max_value=8) | _wrong_numbers,
        },
    )
    arguments = (
        echo_args | st.dictionaries(st.text(max_size=12), json_values, max_size=4) | (json_values)
    )
    fields: dict[str, dict[str, st.SearchStrategy[Any]]] = {
        "hello": {
            "token": st.sampled_from([*tokens, "wrong", ""]) | st.text(max_size=40) | json_values,
            "session_id": st.from_regex(r"[A-Za-z0-9_-]{3,64}", fullmatch=True)
            | st.text(max_size=70)
            | json_values,
            "client": st.fixed_dictionaries(
                {}, optional={"name": st.text(max_size=140), "version": st.text(max_size=70)}
            )
            | json_values,
            "protocol": st.sampled_from([1, 0, 2, -1]) | json_values,
        },
        "list_tools": {},
        "call_tool": {
            "name": names,
            "arguments": arguments,
            "timeout_s": st.floats(min_value=1e-3, max_value=2.0) | _wrong_numbers,
            "stream": st.booleans() | json_values,
        },
        "cancel": {},
        "ping": {},
    }
    shaped = [
        st.fixed_dictionaries({"op": st.just(op)}, optional={"request_id": request_ids, **extra})
        for op, extra in fields.items()
    ]
    wrong_op = st.fixed_dictionaries(
        {"op": st.text(max_size=20) | json_values}, optional={"request_id": request_ids}
    )
    extras = st.dictionaries(st.text(max_size=10), json_values, max_size=3)
    return st.tuples(st.one_of(*shaped, wrong_op), extras).map(lambda t: {**t[1], **t[0]})


def valid_calls(tool_names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Well-formed calls to real tools (arguments still arbitrary), with reused request
    ids so that replays and cancels of finished calls happen too."""
    return st.fixed_dictionaries(
        {
            "op": st.just("call_tool"),
            "request_id": st.sampled_from(["v1", "v2", "v3", "v4"])
            | st.text(min_size=1, max_size=20),
            "name": st.sampled_from(tool_names),
        },
        optional={
            "arguments": st.fixed_dictionaries(
                {},
                optional={
                    "text": st.text(max_size=300),
                    "delay_s": st.floats(min_value=0, max_value=0.02),
                    "stream_chunks": st.integers(min_value=0, max_value=8),
                },
            )
            | st.dictionaries(st.text(max_size=12), json_values, max_size=4),
            "timeout_s": st.floats(min_value=1e-3, max_value=2.0),
            "stream": st.booleans(),
        },
    )


def valid_others() -> st.SearchStrategy[dict[str, Any]]:
    rid = st.sampled_from(["v1", "v2", "v3", "v4"]) | st.text(min_size=1, max_size=20)
    return st.fixed_dictionaries(
        {"op": st.sampled_from(["ping", "list_tools", "cancel"]), "request_id": rid}
    )


def _huge(limit: int) -> st.SearchStrategy[Payload]:
    sizes = st.sampled_from([limit - 200, limit + 1, limit + 4096, 2 * limit - 200, 2 * limit + 1])
    shapes = st.sampled_from(["ping", "call", "garbage"])

    def build(size: int, shape: str) -> Payload:
        if shape == "ping":
            head, tail = '{"op":"ping","request_id":"', '"}'
        elif shape == "call":
            head = '{"op":"call_tool","request_id":"huge","name":"echo","arguments":{"text":"'
            tail = '"}}'
        else:
            head, tail = "", ""
        return head + "x" * max(0, size - len(head) - len(tail)) + tail, True

    return st.builds(build, sizes, shapes)


def _nested(depth: int, shape: str) -> Payload:
    if shape == "arrays":
        return "[" * depth + "]" * depth, True
    if shape == "objects":
        return '{"a":' * depth + "1" + "}" * depth, True
    inner = "[" * depth + "]" * depth
    return (
        f'{{"op":"call_tool","request_id":"deep","name":"echo","arguments":{{"text":{inner}}}}}',
        True,
    )


def payloads(tool_names: list[str], tokens: list[str], limit: int) -> st.SearchStrategy[Payload]:
    """Frames to send after ``hello``: mostly frame-shaped, some mangled, some hostile."""
    objects = frame_objects(tool_names, tokens)

    @st.composite
    def mutated(draw: st.DrawFn) -> Payload:
        text = json.dumps(draw(objects), ensure_ascii=draw(st.booleans()))
        at = draw(st.integers(min_value=0, max_value=len(text)))
        how = draw(st.sampled_from(["truncate", "insert", "delete"]))
        if how == "truncate":
            return text[:at], True
        if how == "insert":
            return text[:at] + draw(st.text(min_size=1, max_size=3)) + text[at:], True
        return text[:at] + text[at + 1 :], True

    shaped = st.builds(
        lambda obj, ascii_only: (json.dumps(obj, ensure_ascii=ascii_only), True),
        objects,
        st.booleans(),
    )
    valid = st.builds(
        lambda obj: (json.dumps(obj, ensure_ascii=False), True),
        valid_calls(tool_names) | valid_others(),
    )
    return st.one_of(
        valid,
        valid,
        shaped,
        shaped,
        mutated(),
        st.builds(lambda v: (json.dumps(v), True), json_values),
        st.builds(lambda t: (t, True), st.text(max_size=200)),
        st.builds(lambda b: (b, True), st.binary(max_size=200)),  # invalid UTF-8 in text frames
        st.builds(lambda b: (b, False), st.binary(max_size=200)),  # binary frames
        st.builds(
            _nested,
            st.integers(min_value=1, max_value=5000),
            st.sampled_from(["arrays", "objects", "arguments"]),
        ),
        _huge(limit),
    )


def first_frames(
    tool_names: list[str], tokens: list[str], limit: int, max_first: int
) -> st.SearchStrategy[Payload]:
    """First frames: hellos of every quality, other ops, the hostile payloads, and
    frames just under and over ``max_first``, the limit before a hello succeeds."""
    hellos = st.fixed_dictionaries(
        {"op": st.just("hello")},
        optional={
            "token": st.sampled_from([*tokens, tokens[0] + "x", tokens[0][:-1], "", None])
            | st.text(max_size=40)
            | json_values,
            "session_id": st.from_regex(r"[A-Za-z0-9_-]{3,64}", fullmatch=True) | json_values,
            "protocol": st.sampled_from([1, 1, 2, 0]) | json_values,
            "client": st.fixed_dictionaries({}, optional={"name": st.text(max_size=140)}),
        },
    )
    return st.one_of(
        st.builds(lambda obj: (json.dumps(obj), True), hellos),
        st.builds(lambda obj: (json.dumps(obj), True), hellos),
        payloads(tool_names, tokens, limit),
        _huge(max_first // 2),
    )
