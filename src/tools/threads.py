"""``fork``: copy one of the caller's threads, up to a message, into a new thread.

The console's "fork" button, and any script, call it by name. A fork belongs to
the owner of the thread it copies, which must be the caller (another
principal's thread is ``CONVERSATION_NOT_FOUND``, as everywhere); forks nest at
most ``EXAI_FORK_MAX_DEPTH`` deep. Nothing is sent to a model.

Unlisted, like ``completion``: a model choosing tools gains nothing from
forking a thread it can simply continue, and every MCP client would pay for
its schema in each ``tools/list``. Scopes, rate limits and the call's audit
events apply as to any tool.
"""

from __future__ import annotations

import json

from pydantic import Field

from exai.errors import InternalError
from exai.protocol import UUID_PATTERN
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult

__all__ = ["TOOLS", "ForkInput", "ForkTool"]


class ForkInput(ToolInput):
    continuation_id: str = Field(pattern=UUID_PATTERN, description="The thread to copy.")
    at_seq: int | None = Field(
        default=None, ge=1, description="Copy messages up to this seq (default: all)."
    )


class ForkTool(Tool):
    name = "fork"
    description = "Copy one of your exai threads, up to a message, into a new thread."
    Input = ForkInput
    profile = "lean"
    listed = False

    async def run(self, arguments: ForkInput, context: ToolContext) -> ToolResult:
        store = context.services.store
        if store is None:
            raise InternalError("the daemon was started without a conversation store")
        fork = await store.fork(arguments.continuation_id, context.principal.name,
                                at_seq=arguments.at_seq)  # fmt: skip
        out = {"continuation_id": fork.id, "parent_id": fork.parent_id,
               "fork_point": fork.fork_point, "depth": fork.depth}  # fmt: skip
        return ToolResult(json.dumps(out), metadata={"continuation_id": fork.id, "fork": out})


TOOLS: list[Tool] = [ForkTool()]
