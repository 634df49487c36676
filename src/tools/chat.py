"""``chat``: talk to a Kimi or GLM model, continuing a conversation when asked.

The tool itself only maps its arguments onto one model turn; history, files,
model choice, streaming and storage all happen in :mod:`exai.tools.turn`. A
thread started with a system prompt of its own keeps it instead of
:data:`SYSTEM_PROMPT`.
"""

from __future__ import annotations

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from exai.protocol import UUID_PATTERN
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from exai.tools.turn import ReasoningEffort, ThinkingMode, TurnRequest, run_turn

__all__ = ["TOOLS", "ChatInput", "ChatTool"]

CONTINUE_CONVERSATION = (
    "Continue an earlier exai conversation: the continuation_id a previous result returned. "
    "exai keeps the history, so send only the new message. Omit to start a new one."
)

SYSTEM_PROMPT = (
    "You are a senior engineer helping another engineer inside their IDE. Answer precisely "
    "and concisely. When files are provided, their lines are numbered: cite them as "
    "path:line. Say so when you are unsure rather than guessing."
)


class ChatInput(ToolInput):
    prompt: str = Field(min_length=1, description="Your message.")
    model: str = Field(default="auto", description='Model name or alias, or "auto".')
    continuation_id: str | None = Field(
        default=None, pattern=UUID_PATTERN, description=CONTINUE_CONVERSATION
    )
    files: list[str] = Field(
        default_factory=list,
        description="Absolute file or folder paths; PDFs, Office files and images go to models "
        "that read them.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    thinking_mode: ThinkingMode = Field(default="auto", description="Model reasoning on/off.")
    # How hard the model reasons, for scripts and the faces; left out of the schema
    # models see, which the standard profile's token budget has no room for.
    reasoning_effort: SkipJsonSchema[ReasoningEffort | None] = None
    use_websearch: bool = Field(default=False, description="Let the model search the web.")
    stream: bool = Field(default=False, description="Stream the answer as it is written.")
    sensitive: bool = Field(default=False, description="Route to models allowed sensitive data.")
    use_memory: bool = True  # a new thread starts with the caller's relevant memories
    # The system prompt a new thread keeps in place of SYSTEM_PROMPT. Set by the
    # OpenAI-compatible endpoint from a request's system message; left out of the
    # schema because it is not something a model choosing arguments should change.
    system_prompt: SkipJsonSchema[str | None] = Field(default=None, min_length=1)


class ChatTool(Tool):
    name = "chat"
    description = (
        "Ask Kimi (Moonshot) or GLM (Z.ai) for a second opinion, an explanation or ideas, "
        "optionally about files. exai keeps the conversation: pass a result's "
        "continuation_id to continue it."
    )
    Input = ChatInput
    profile = "lean"

    async def run(self, arguments: ChatInput, context: ToolContext) -> ToolResult:
        if arguments.stream:  # the argument and the protocol's "stream" flag mean the same
            context.stream_requested = True
        result = await run_turn(
            context,
            TurnRequest(
                prompt=arguments.prompt,
                system_prompt=SYSTEM_PROMPT,
                model=arguments.model,
                continuation_id=arguments.continuation_id,
                files=arguments.files,
                temperature=arguments.temperature,
                thinking_mode=arguments.thinking_mode,
                reasoning_effort=arguments.reasoning_effort,
                use_websearch=arguments.use_websearch,
                sensitive=arguments.sensitive,
                keep_system_prompt=arguments.system_prompt,
                use_thread_prompt=True,
                use_memory=arguments.use_memory,
            ),
        )
        return ToolResult(result.text, metadata=result.metadata)


TOOLS: list[Tool] = [ChatTool()]
