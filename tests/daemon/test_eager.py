"""A call's first step is taken by the code that starts it, as the call's own task.

``start_eagerly`` must be indistinguishable, from inside the coroutine, from a
task started the usual way: the current task, the context, a timeout, a cancel
that arrives before the task's first pass, an exception. And a call that
finishes in its first step is answered before ``submit`` returns.
"""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from exai.auth import Principal
from exai.daemon.eager import start_eagerly
from exai.protocol import CallToolFrame, dump_frame_bytes
from tests.daemon.tools import CountingTool

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("eager_test", default="unset")


async def test_the_first_step_runs_now_as_the_task_in_its_own_context() -> None:
    loop = asyncio.get_running_loop()
    outer = asyncio.current_task()
    seen: dict[str, object] = {}

    async def work() -> str:
        seen["task"] = asyncio.current_task()
        _VAR.set("inside")
        seen["first"] = _VAR.get()
        await asyncio.sleep(0)
        seen["later_task"] = asyncio.current_task()
        seen["later"] = _VAR.get()
        return "done"

    task, finished = start_eagerly(loop, work(), name="eager-1")
    assert "task" in seen and not finished  # ran before start_eagerly returned
    assert seen["task"] is task
    assert asyncio.current_task() is outer  # the caller's task is current again
    assert _VAR.get() == "unset"  # the step's context was a copy
    assert await task == "done"
    assert seen["later_task"] is task and seen["later"] == "inside"
    assert task.get_name() == "eager-1"


async def test_a_coroutine_that_finishes_in_its_first_step() -> None:
    async def work() -> int:
        return 42

    task, finished = start_eagerly(asyncio.get_running_loop(), work(), name="eager-2")
    assert finished and not task.done()  # the task ends on the loop's next pass
    assert await task == 42


async def test_asyncio_timeout_in_the_first_step_cancels_the_right_task() -> None:
    outcome: list[str] = []

    async def work() -> None:
        try:
            async with asyncio.timeout(0.01):  # needs a current task: raises without one
                await asyncio.sleep(10)
        except TimeoutError:
            outcome.append("timed out")

    task, _ = start_eagerly(asyncio.get_running_loop(), work(), name="eager-3")
    await asyncio.wait_for(task, 5)
    assert outcome == ["timed out"]
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_a_cancel_before_the_tasks_first_pass_reaches_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    waited_on = loop.create_future()
    seen: list[str] = []

    async def work() -> str:
        try:
            await waited_on
        except asyncio.CancelledError:
            seen.append("cancelled where it waited")
            return "answered anyway"
        return "not cancelled"

    task, finished = start_eagerly(loop, work(), name="eager-4")
    assert not finished
    task.cancel()  # before the loop has run the task at all
    assert await task == "answered anyway"
    assert seen == ["cancelled where it waited"]
    assert waited_on.cancelled()  # as a task's cancel does to the future it waits for


async def test_a_cancel_after_the_coroutine_waited_once_more() -> None:
    seen: list[str] = []

    async def work() -> None:
        await asyncio.sleep(0)
        try:
            await asyncio.sleep(10)
        finally:
            seen.append("cleaned up")

    task, _ = start_eagerly(asyncio.get_running_loop(), work(), name="eager-5")
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cleaned up"]


async def test_an_exception_in_the_first_step_is_the_tasks() -> None:
    async def work() -> None:
        raise ValueError("at once")

    task, finished = start_eagerly(asyncio.get_running_loop(), work(), name="eager-6")
    assert finished
    with pytest.raises(ValueError, match="at once"):
        await task


def test_started_from_a_loop_callback_with_no_task_running() -> None:
    """The WebSocket face starts calls from a protocol callback, where no task runs."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[asyncio.Task[str]] = loop.create_future()

        async def work() -> str:
            assert asyncio.current_task() is not None
            await asyncio.sleep(0)
            return "from a callback"

        def callback() -> None:
            assert asyncio.current_task(loop) is None
            task, _ = start_eagerly(loop, work(), name="eager-7")
            assert asyncio.current_task(loop) is None
            started.set_result(task)

        loop.call_soon(callback)
        assert await (await started) == "from a callback"

    asyncio.run(main())


async def test_an_echo_call_is_answered_before_submit_returns(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    counting = CountingTool()
    daemon = await daemon_factory(extra_tools=[counting])
    core = daemon.core
    session, _ = await core.open_session(Principal("local"), None)
    sent: list[bytes] = []

    class Sender:
        async def __call__(self, frame: object) -> None:
            sent.append(frame if isinstance(frame, bytes) else dump_frame_bytes(frame))

        def post(self, frame: object) -> None:
            sent.append(frame if isinstance(frame, bytes) else dump_frame_bytes(frame))

        def now(self, frame: bytes) -> bool:
            sent.append(frame)
            return True

    session.send = Sender()
    frame = CallToolFrame(request_id="now", name="echo", arguments={"text": "at once"})
    assert core.submit(session, frame) is None  # nothing left running
    assert len(sent) == 1 and b'"call_tool_res"' in sent[0] and b"at once" in sent[0]
    assert "now" not in session.calls and session.replay("now") is not None

    # A call that waits has taken its first step too (the tool has started), and
    # returns its task.
    slow = CallToolFrame(request_id="later", name="count", arguments={"seconds": 0.05})
    task = core.submit(session, slow)
    assert task is not None and counting.runs == 1 and "later" in session.calls
    await task
    assert counting.completed == 1 and any(b'"later"' in f for f in sent)
