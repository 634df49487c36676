"""The client's demultiplexer, without a socket: each frame reaches the request it
answers, by request_id, whatever order the daemon sends them in."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from exai.client import ConnectError, RequestFailed
from exai.client.demux import Demultiplexer, PendingCall
from exai.protocol import (
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    ErrorCode,
    ErrorFrame,
    ErrorInfo,
    PongFrame,
    ProgressFrame,
    ResultMetadata,
    StreamChunk,
)


def _call(demux: Demultiplexer, rid: str, **callbacks: Any) -> PendingCall:
    fut: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
    pending = PendingCall(CallToolFrame(request_id=rid, name="echo"), fut, **callbacks)
    demux.calls[rid] = pending
    return pending


def _result(rid: str, text: str = "") -> CallToolResult:
    return CallToolResult(request_id=rid, metadata=ResultMetadata(tool=text or "echo"))


async def test_results_reach_their_calls_in_any_order() -> None:
    demux = Demultiplexer()
    first, second = _call(demux, "a"), _call(demux, "b")
    await demux.route(_result("b", "second"))
    assert second.future.result().metadata.tool == "second" and not first.future.done()
    await demux.route(_result("a", "first"))
    assert first.future.result().metadata.tool == "first"
    assert demux.calls == {}


async def test_ack_chunks_and_progress_go_to_their_call_only() -> None:
    demux = Demultiplexer()
    chunks: list[str] = []
    progress: list[str] = []
    mine = _call(demux, "a", on_chunk=lambda c: chunks.append(c.text),
                 on_progress=lambda p: progress.append(p.message))  # fmt: skip
    _call(demux, "b", on_chunk=lambda c: chunks.append("wrong"))
    await demux.route(CallToolAck(request_id="a", timeout_s=5.0))
    await demux.route(StreamChunk(request_id="a", seq=0, text="hel"))
    await demux.route(StreamChunk(request_id="a", seq=1, text="lo"))
    await demux.route(ProgressFrame(request_id="a", message="working"))
    assert chunks == ["hel", "lo"] and progress == ["working"]
    assert mine.ack is not None and mine.ack.timeout_s == 5.0
    assert mine.stats.chunks == 2 and mine.stats.ack_s is not None
    assert not mine.future.done()


async def test_an_error_frame_fails_its_call_or_its_request() -> None:
    demux = Demultiplexer()
    call = _call(demux, "a")
    waiter = asyncio.get_running_loop().create_future()
    demux.waiters["p"] = waiter
    error = ErrorInfo(code=ErrorCode.INVALID_REQUEST, message="no")
    await demux.route(ErrorFrame(request_id="a", error=error))
    await demux.route(ErrorFrame(request_id="p", error=error))
    for fut in (call.future, waiter):
        with pytest.raises(RequestFailed, match="no"):
            fut.result()


async def test_a_frame_for_no_one_is_dropped() -> None:
    demux = Demultiplexer()
    call = _call(demux, "a")
    await demux.route(_result("zzz"))
    await demux.route(PongFrame(request_id="zzz"))
    assert not call.future.done() and list(demux.calls) == ["a"]


async def test_a_lost_connection_fails_requests_but_keeps_calls_for_resending() -> None:
    demux = Demultiplexer()
    call = _call(demux, "a")
    waiter = asyncio.get_running_loop().create_future()
    demux.waiters["p"] = waiter
    demux.fail_waiters(ConnectError("connection lost"))
    assert isinstance(waiter.exception(), ConnectError)
    assert not call.future.done() and list(demux.calls) == ["a"]
    demux.fail_all(ConnectError("client closed"))
    assert isinstance(call.future.exception(), ConnectError) and demux.calls == {}


def test_request_ids_are_unique_per_client() -> None:
    one, two = Demultiplexer(), Demultiplexer()
    ids = [one.new_request_id() for _ in range(100)] + [two.new_request_id() for _ in range(100)]
    assert len(set(ids)) == 200
