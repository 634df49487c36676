"""``remember``, ``recall`` and ``forget``: the calling principal's long-term memory.

Each tool acts on the caller's own memories only (see :mod:`exai.memory`); an id
belonging to another principal is as unknown as one that never existed.
Memories recalled here are also what a new conversation's system prompt gets
(see :mod:`exai.tools.turn`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from exai.errors import ToolNotFoundError, UnavailableError
from exai.memory.base import MemoryType
from exai.memory.service import MAX_CONTENT_CHARS, MemoryService
from exai.protocol import MemoryAnswer
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult

__all__ = ["TOOLS", "ForgetTool", "RecallTool", "RememberTool"]


def _service(context: ToolContext) -> MemoryService:
    services = context.services
    memory = services.memory
    if memory is None:
        if not services.settings.memory_enabled:
            raise ToolNotFoundError(f"{context.tool}: long-term memory is off on this daemon "
                                    "(EXAI_MEMORY_ENABLED=false)")  # fmt: skip
        # The services are built before any face listens; a call that finds memory
        # missing anyway is early, not wrong.
        raise UnavailableError("long-term memory is not up yet on this daemon; try again",
                               retry_after_s=1.0)  # fmt: skip
    service: MemoryService = memory
    return service


class RememberInput(ToolInput):
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    type: MemoryType = "fact"
    tags: list[str] = Field(default_factory=list, max_length=16)
    project: str = ""  # the project root it applies to; empty: every project


class RememberTool(Tool):
    name = "remember"
    description = (
        "Store a fact, preference, rule or decision that later exai conversations start with."
    )
    Input = RememberInput

    async def run(self, arguments: RememberInput, context: ToolContext) -> ToolResult:
        done = await _service(context).remember(
            context.principal.name, arguments.content, arguments.type, arguments.tags,
            arguments.project or None,
        )  # fmt: skip
        out = {"id": done.memory.id, "action": done.action, "type": done.memory.type}
        return ToolResult(json.dumps(out), metadata=MemoryAnswer(memory=out).fields())


class RecallInput(ToolInput):
    query: str = Field(min_length=1, max_length=4000)
    limit: int = Field(default=10, ge=1, le=50)
    types: list[MemoryType] = Field(default_factory=list)
    project: str = ""


class RecallTool(Tool):
    name = "recall"
    description = "Search your long-term memories, most relevant first."
    Input = RecallInput

    async def run(self, arguments: RecallInput, context: ToolContext) -> ToolResult:
        ranked = await _service(context).recall(
            context.principal.name, arguments.query, limit=arguments.limit,
            types=arguments.types or None,
            projects=[arguments.project] if arguments.project else None,
        )  # fmt: skip
        items: list[dict[str, Any]] = [
            {"id": r.memory.id, "type": r.memory.type, "content": r.memory.content,
             "tags": r.memory.tags, "project": r.memory.project, "score": round(r.score, 6)}
            for r in ranked
        ]  # fmt: skip
        return ToolResult(
            json.dumps({"memories": items}), metadata=MemoryAnswer(memories=items).fields()
        )


class ForgetInput(ToolInput):
    id: str = Field(min_length=1, max_length=64)


class ForgetTool(Tool):
    name = "forget"
    description = "Delete one of your memories by id."
    Input = ForgetInput

    async def run(self, arguments: ForgetInput, context: ToolContext) -> ToolResult:
        memory = await _service(context).forget(context.principal.name, arguments.id)
        out = {"id": memory.id, "forgotten": True}
        return ToolResult(json.dumps(out), metadata=MemoryAnswer(memory=out).fields())


TOOLS: list[Tool] = [RememberTool(), RecallTool(), ForgetTool()]
