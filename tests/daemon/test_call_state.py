"""A call's life: every legal transition, and illegal ones refused by name."""

from __future__ import annotations

import asyncio

import pytest

from exai.daemon.call import Call, CallState, IllegalTransition, StopReason


def _call() -> Call:
    return Call("r1", "echo", timeout_s=5.0, deadline=10.0, started=0.0)


def _at(state: CallState) -> Call:
    """A call brought to ``state`` by its legal moves."""
    call = _call()
    moves = {
        CallState.ADMITTED: [],
        CallState.QUEUED: [call.begin],
        CallState.RUNNING: [call.begin, call.run],
        CallState.FINISHED: [call.begin, call.run, call.finish],
        CallState.DROPPED: [call.begin, call.finish],
    }[state]
    for move in moves:
        move()
    assert call.state is state
    return call


def test_a_call_that_runs_ends_finished_and_is_kept():
    call = _call()
    assert (call.state, call.ran, call.finished) == (CallState.ADMITTED, False, False)
    call.begin()
    assert (call.state, call.ran, call.finished) == (CallState.QUEUED, False, False)
    call.run()
    assert (call.state, call.ran, call.finished) == (CallState.RUNNING, True, False)
    call.finish()
    assert (call.state, call.ran, call.finished) == (CallState.FINISHED, True, True)


def test_a_call_that_ends_while_queued_is_dropped_and_not_kept():
    call = _at(CallState.QUEUED)
    call.finish()
    assert (call.state, call.ran, call.finished) == (CallState.DROPPED, False, True)


@pytest.mark.parametrize(
    ("state", "move"),
    [
        (CallState.ADMITTED, "run"),
        (CallState.ADMITTED, "finish"),
        (CallState.QUEUED, "begin"),
        (CallState.RUNNING, "begin"),
        (CallState.RUNNING, "run"),
        (CallState.FINISHED, "begin"),
        (CallState.FINISHED, "run"),
        (CallState.FINISHED, "finish"),
        (CallState.DROPPED, "run"),
        (CallState.DROPPED, "finish"),
    ],
)
def test_an_illegal_move_is_refused_and_leaves_the_state(state, move):
    call = _at(state)
    with pytest.raises(IllegalTransition) as refused:
        getattr(call, move)()
    assert call.state is state
    assert str(refused.value) == f"call 'r1': cannot {move} from {state.value}"


async def test_stop_keeps_the_first_reason_and_cancels_only_a_started_call():
    never = asyncio.get_running_loop().create_future()

    async def waits() -> None:
        await never

    call = _call()
    call.task = asyncio.ensure_future(waits())
    # Not yet begun: not cancelled now (it answers when it starts), the reason kept.
    assert call.stop(StopReason.CANCEL) is False
    assert call.stop_reason is StopReason.CANCEL
    call.begin()
    assert call.stop(StopReason.TIMEOUT) is True
    assert call.stop_reason is StopReason.CANCEL  # the first reason is the one reported
    call.run()
    call.finish()
    assert call.stop(StopReason.SHUTDOWN) is False  # finished: nothing to stop
    call.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call.task
