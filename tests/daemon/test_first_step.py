"""The dispatcher takes a tool's first step itself, then awaits the rest through _Rest.

_Rest must behave exactly as ``await coro`` would from that point: values and
exceptions passed both ways, cleanup on cancel, the tool's return value.
"""

from __future__ import annotations

import asyncio

import pytest

from exai.daemon.run import _Rest


async def _through_rest(coro):  # type: ignore[no-untyped-def]
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return done.value
    return await _Rest(coro, pending)


async def test_rest_returns_what_the_coroutine_returns_after_several_waits() -> None:
    async def tool() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        fut = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, fut.set_result, "from a future")
        return await fut

    assert await _through_rest(tool()) == "from a future"


async def test_rest_passes_a_cancel_in_and_the_tool_can_clean_up() -> None:
    seen: list[str] = []

    async def tool() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("cleaned up")

    task = asyncio.create_task(_through_rest(tool()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled", "cleaned up"]


async def test_rest_lets_the_tool_swallow_a_cancel_and_answer() -> None:
    async def tool() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "stopped politely"
        return "slept"

    task = asyncio.create_task(_through_rest(tool()))
    await asyncio.sleep(0.01)
    task.cancel()
    assert await task == "stopped politely"


async def test_rest_raises_what_the_tool_raises_after_waiting() -> None:
    async def tool() -> None:
        await asyncio.sleep(0)
        raise ValueError("late failure")

    with pytest.raises(ValueError, match="late failure"):
        await _through_rest(tool())
