"""Tools that exist only for the daemon tests: they count and record what happens."""

from __future__ import annotations

import asyncio

from pydantic import Field

from exai.errors import ProviderError
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult


class SleepInput(ToolInput):
    seconds: float = Field(default=0.0, ge=0)
    label: str = ""


class CountingTool(Tool):
    """Counts executions, so replay tests can prove a tool ran once."""

    name = "count"
    description = "test: counts runs"
    Input = SleepInput

    def __init__(self) -> None:
        self.runs = 0
        self.started = asyncio.Event()
        self.cancelled = 0
        self.completed = 0

    async def run(self, arguments: SleepInput, context: ToolContext) -> ToolResult:
        self.runs += 1
        self.started.set()
        try:
            await asyncio.sleep(arguments.seconds)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.completed += 1
        return ToolResult(f"{arguments.label}:{self.runs}", metadata={"runs": self.runs})


class FailingTool(Tool):
    name = "fail"
    description = "test: raises"
    Input = SleepInput

    async def run(self, arguments: SleepInput, context: ToolContext) -> ToolResult:
        if arguments.label == "bug":
            raise RuntimeError("boom")
        raise ProviderError("upstream said no", retryable=True)


class ProgressTool(Tool):
    name = "progressive"
    description = "test: reports progress"
    Input = SleepInput

    async def run(self, arguments: SleepInput, context: ToolContext) -> ToolResult:
        for i in range(3):
            await context.progress(f"step {i + 1}", i + 1, 3)
        await asyncio.sleep(arguments.seconds)
        return ToolResult("done")


class LoggingTool(Tool):
    """Logs through a module-level logger, as providers and stores do."""

    name = "logs"
    description = "test: writes a log line"
    Input = SleepInput

    async def run(self, arguments: SleepInput, context: ToolContext) -> ToolResult:
        from exai.logs import get_logger

        get_logger("exai.somewhere.deep").warning("deep log line", label=arguments.label)
        context.log.warning("context log line", label=arguments.label)
        return ToolResult("logged")


class UnsendableTool(Tool):
    """Returns what no result frame can carry: metadata that is not JSON."""

    name = "unsendable"
    description = "test: returns an object the protocol cannot serialize"
    Input = SleepInput

    async def run(self, arguments: SleepInput, context: ToolContext) -> ToolResult:
        return ToolResult("fine text", metadata={"handle": object()})
