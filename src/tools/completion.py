"""``completion``: one model answer to a message array the caller sends whole.

The stateless half of the OpenAI-compatible endpoint (:mod:`exai.web.openai`):
the caller keeps its own history and sends all of it, so nothing is read from
or written to the conversation store, and the messages reach the provider as
given. Choosing the model (``"auto"``, aliases), the per-provider limits,
fallback and the ``provider_request`` audit event are the provider registry's,
as for every tool; the call itself goes through the dispatcher like any other,
so scopes, rate limits, deadlines and the call's audit events apply.

Unlisted: a model choosing tools has no use for a raw message array, and every
MCP client would pay for its schema in each ``tools/list``. The endpoint, and
any script, calls it by name; a principal whose scopes leave it out cannot use
the stateless endpoint. Its answers are never stored as artifacts: its callers
take long answers whole.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from exai.errors import InternalError
from exai.providers import ChatRequest, ModelNeeds
from exai.store.tokens import estimator_for
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from exai.tools.turn import ThinkingMode, ask_model, response_cost

__all__ = ["TOOLS", "CompletionInput", "CompletionTool", "Message"]


class Message(BaseModel):
    """One message in the OpenAI chat format; other keys (``name``, ``tool_calls``,
    ``tool_call_id``...) are kept and sent on unchanged."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class CompletionInput(ToolInput):
    messages: list[Message] = Field(min_length=1, description="The whole conversation, in order.")
    model: str = Field(default="auto", description='Model name or alias, or "auto".')
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, description="Longest reply, in tokens.")
    thinking_mode: ThinkingMode = Field(default="auto", description="Model reasoning on/off.")
    stream: bool = Field(default=False, description="Stream the answer as it is written.")


class CompletionTool(Tool):
    name = "completion"
    description = (
        "One answer from a Kimi or GLM model to a whole message array (OpenAI chat format); "
        "stateless: nothing is stored."
    )
    Input = CompletionInput
    profile = "lean"
    listed = False
    spill_results = False

    async def run(self, arguments: CompletionInput, context: ToolContext) -> ToolResult:
        providers = context.services.providers
        if providers is None:
            raise InternalError("the daemon was started without providers")
        if arguments.stream:  # the argument and the protocol's "stream" flag mean the same
            context.stream_requested = True
        messages = [m.model_dump(exclude_unset=True) for m in arguments.messages]
        needs = ModelNeeds(
            thinking=arguments.thinking_mode == "on",
            min_context_tokens=estimator_for("generic").messages(messages),
            tool=context.tool,
        )
        info = providers.resolve(arguments.model, needs)
        thinking = arguments.thinking_mode
        request = ChatRequest(
            model=info.model_id,
            messages=messages,
            temperature=arguments.temperature,
            max_output_tokens=arguments.max_tokens,
            thinking=None if thinking == "auto" else thinking == "on",
            request_id=context.request_id,
            continue_cut=arguments.max_tokens is None,
        )
        response = await ask_model(context, request, info)
        metadata: dict[str, Any] = {
            "model": response.model,
            "provider": response.provider,
            **response.usage.metadata(),
            "cost": None
            if (cost := response_cost(providers, response)) is None
            else cost.as_dict(),
            "finish_reason": response.finish_reason or "stop",
        }
        if response.fallback_from:
            metadata["fallback_from"] = response.fallback_from
        if response.reasoning:
            metadata["reasoning"] = response.reasoning
        return ToolResult(response.text, metadata=metadata)


TOOLS: list[Tool] = [CompletionTool()]
